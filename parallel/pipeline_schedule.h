// The pipeline schedule of one training iteration: Megatron-LM's
// forward_backward_pipelining_without_interleaving (PipeDream-Flush "1F1B"). Stage r of p runs
// its m micro-batches in three loops:
//   warmup:   w = min(p - r - 1, m) forwards (recv_forward, forward, send_forward);
//   steady:   m - w times one forward then the backward of the oldest micro-batch in flight;
//   cooldown: the w backwards left (recv_backward, backward, send_backward).
// So at most min(p - r, m) micro-batches are in flight on stage r (max_in_flight): the caller
// keeps that many activation sets and may use set micro % max_in_flight for micro-batch `micro`
// (the ones in flight are always consecutive). Backwards run in forward order.
//
// The schedule knows nothing of the model: it orders the two callbacks and the P2P calls.
// forward_step(micro, input) runs micro-batch `micro` (0..m-1, increasing) on this stage; `input`
// is the previous stage's output (undefined on the first stage, which reads its own data); it
// returns the stage output to send on (ignored on the last stage, which keeps its loss itself).
// backward_step(micro, output_grad) runs that micro-batch's backward; `output_grad` is the next
// stage's input gradient (undefined on the last stage); it returns dL/d(input) to send back
// (ignored on the first stage). Both returned tensors must stay valid until the next callback.
//
// Ownership: the caller owns the receive buffers (PipelineBuffers, made once through the backend
// so they live on its device and count in its measured peak, as the planner counts them). Not
// thread-safe; collective over the pipeline group.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/p2p.h"

namespace mtnlg {

using ForwardStep = std::function<Tensor(int64_t micro, const Tensor& input)>;
using BackwardStep = std::function<Tensor(int64_t micro, const Tensor& output_grad)>;

// Micro-batches in flight at once on `stage` of `num_stages` with m micro-batches.
int64_t max_in_flight(int64_t num_stages, int64_t stage, int64_t num_micro_batches);

// A stage's receive buffers, `shape` in `dtype` (the activation [b, s, h] both ways): the
// previous stage's output (every stage but the first) and the next stage's input gradient (every
// stage but the last); undefined where the stage receives nothing. The callbacks copy what they
// receive before the next receive, so one of each serves every micro-batch.
struct PipelineBuffers {
  Tensor input, output_grad;
};
// With num_chunks > 1 (the interleaved schedule) every stage receives both ways: the first stage's
// later chunks from the last stage, and the converse.
PipelineBuffers make_pipeline_buffers(Backend& backend, const P2PCommunicator& p2p,
                                      const std::vector<int64_t>& shape, DType dtype,
                                      int64_t num_chunks = 1);

// One iteration's forwards and backwards in 1F1B order (see above).
void forward_backward_pipelining_without_interleaving(P2PCommunicator& p2p,
                                                      int64_t num_micro_batches,
                                                      PipelineBuffers& buffers,
                                                      const ForwardStep& forward_step,
                                                      const BackwardStep& backward_step);

// The interleaved 1F1B schedule (Megatron-LM's forward_backward_pipelining_with_interleaving):
// each of the p stages holds v model chunks, chunk c of stage r being virtual stage c*p + r, so
// the model is v rounds of the ring (chunk c on the last stage feeds chunk c + 1 on the first).
// A stage runs m*v forward and m*v backward steps; step k is micro-batch (k / pv) p + k % p of
// chunk (k % pv) / p (backward: chunk v - 1 - that), so micro-batches go through in groups of p.
// Warm-up: (p - r - 1) * 2 + (v - 1) * p forwards (every step when m == p), then one forward and
// one backward per step, then the backwards left. Every exchange is one batch
// (P2PCommunicator::ring_exchange). Needs p > 1 and m a multiple of p. The callbacks take the
// chunk; a forward of chunk 0 on the first stage gets no input, a backward of chunk v - 1 on the
// last stage no output gradient; otherwise what they get is valid only until they return (one
// receive buffer each way serves every step, as in the plain schedule).
using ChunkForwardStep = std::function<Tensor(int64_t chunk, int64_t micro, const Tensor& input)>;
using ChunkBackwardStep =
    std::function<Tensor(int64_t chunk, int64_t micro, const Tensor& output_grad)>;
void forward_backward_pipelining_with_interleaving(P2PCommunicator& p2p, int64_t num_chunks,
                                                   int64_t num_micro_batches,
                                                   PipelineBuffers& buffers,
                                                   const ChunkForwardStep& forward_step,
                                                   const ChunkBackwardStep& backward_step);
// Forward steps whose backward has not run yet, at most, on `stage` under that schedule: the
// activation sets (each one chunk's) the stage keeps.
int64_t max_in_flight_interleaved(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                  int64_t num_micro_batches);
// The same per chunk: [c] = the most micro-batches of chunk c in flight at once. A chunk's
// forwards and backwards both go in micro-batch order, so those in flight are consecutive and
// micro % [c] picks distinct activation sets.
std::vector<int64_t> max_in_flight_per_chunk(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                             int64_t num_micro_batches);

// The share of an iteration a stage idles in the schedule's bubble, with equal stages:
// (p - 1) / (v m + p - 1), v = 1 for plain 1F1B (Narayanan et al. 2021: the interleaved bubble is
// (p - 1) chunk-steps of m v). 0 for one stage.
double pipeline_bubble_fraction(int64_t num_stages, int64_t num_chunks, int64_t num_micro_batches);

// Forwards only (evaluation): per micro-batch and chunk in order, receive the input (but for
// chunk 0 on the first stage), forward_step, send the output on (but for the last chunk on the
// last stage). With chunks each micro-batch goes around the ring before the next starts: a
// chain, so no exchange can deadlock, but the stages take turns (evaluation is a few
// micro-batches every eval.interval iterations).
void forward_pipelining(P2PCommunicator& p2p, int64_t num_chunks, int64_t num_micro_batches,
                        PipelineBuffers& buffers, const ChunkForwardStep& forward_step);

}  // namespace mtnlg
