#include "parallel/pipeline_schedule.h"

#include <algorithm>

#include "core/status.h"

namespace mtnlg {

int64_t max_in_flight(int64_t num_stages, int64_t stage, int64_t num_micro_batches) {
  return std::max<int64_t>(1, std::min(num_stages - stage, num_micro_batches));
}

PipelineBuffers make_pipeline_buffers(Backend& backend, const P2PCommunicator& p2p,
                                      const std::vector<int64_t>& shape, DType dtype,
                                      int64_t num_chunks) {
  PipelineBuffers b;
  const bool ring = num_chunks > 1 && p2p.num_stages() > 1;
  if (ring || !p2p.is_first_stage()) b.input = backend.alloc(shape, dtype);
  if (ring || !p2p.is_last_stage()) b.output_grad = backend.alloc(shape, dtype);
  return b;
}

namespace {
void check_buffers(const P2PCommunicator& p2p, const PipelineBuffers& b, bool backward) {
  MTNLG_CHECK_MSG(p2p.is_first_stage() || b.input.defined(),
                  "pipeline stage " << p2p.stage() << " has no input receive buffer");
  MTNLG_CHECK_MSG(!backward || p2p.is_last_stage() || b.output_grad.defined(),
                  "pipeline stage " << p2p.stage() << " has no gradient receive buffer");
}
}  // namespace

void forward_backward_pipelining_without_interleaving(P2PCommunicator& p2p,
                                                      int64_t num_micro_batches,
                                                      PipelineBuffers& buffers,
                                                      const ForwardStep& forward_step,
                                                      const BackwardStep& backward_step) {
  const int64_t m = num_micro_batches;
  MTNLG_CHECK_GT(m, 0);
  check_buffers(p2p, buffers, true);
  const int64_t num_warmup = std::min<int64_t>(p2p.num_stages() - p2p.stage() - 1, m);
  const int64_t num_steady = m - num_warmup;
  Tensor& input = buffers.input;
  Tensor& output_grad = buffers.output_grad;
  int64_t next_forward = 0, next_backward = 0;

  // Warmup: forwards only, filling the pipeline.
  for (int64_t i = 0; i < num_warmup; ++i) {
    p2p.recv_forward(input);
    const Tensor output = forward_step(next_forward++, input);
    p2p.send_forward(output);
  }

  // Steady 1F1B: one forward, then the backward of the oldest micro-batch in flight.
  if (num_steady > 0) p2p.recv_forward(input);
  for (int64_t i = 0; i < num_steady; ++i) {
    const bool last = i == num_steady - 1;
    const Tensor output = forward_step(next_forward++, input);
    p2p.send_forward_recv_backward(output, output_grad);
    const Tensor input_grad = backward_step(next_backward++, output_grad);
    if (last) {
      p2p.send_backward(input_grad);
    } else {
      p2p.send_backward_recv_forward(input_grad, input);
    }
  }

  // Cooldown: the backwards of the warmup's micro-batches.
  for (int64_t i = 0; i < num_warmup; ++i) {
    p2p.recv_backward(output_grad);
    const Tensor input_grad = backward_step(next_backward++, output_grad);
    p2p.send_backward(input_grad);
  }
  MTNLG_CHECK_EQ(next_forward, m);
  MTNLG_CHECK_EQ(next_backward, m);
}

namespace {

// Which chunk and micro-batch the k-th forward (or backward) step of the interleaved schedule
// runs (Megatron-LM's get_model_chunk_id and microbatch numbering).
struct InterleavedSteps {
  int64_t p, v;
  // k may be negative (the schedule asks where a stage p - 1 steps behind is): floor modulo, as
  // Python's, which Megatron's code relies on.
  int64_t chunk(int64_t k, bool forward) const {
    const int64_t c = ((k % (p * v) + p * v) % (p * v)) / p;
    return forward ? c : v - 1 - c;
  }
  int64_t micro(int64_t k) const { return k / (p * v) * p + k % p; }
};

int64_t interleaved_warmup(int64_t p, int64_t stage, int64_t v, int64_t m) {
  const int64_t total = m * v;
  if (m == p) return total;
  return std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
}

}  // namespace

double pipeline_bubble_fraction(int64_t num_stages, int64_t num_chunks, int64_t num_micro_batches) {
  return static_cast<double>(num_stages - 1) /
         static_cast<double>(num_chunks * num_micro_batches + num_stages - 1);
}

int64_t max_in_flight_interleaved(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                  int64_t num_micro_batches) {
  const int64_t warmup = interleaved_warmup(num_stages, stage, num_chunks, num_micro_batches);
  // Steady steps run a forward before the backward: one more in flight, unless all is warm-up.
  return std::min(num_chunks * num_micro_batches, warmup + 1);
}

std::vector<int64_t> max_in_flight_per_chunk(int64_t num_stages, int64_t stage, int64_t num_chunks,
                                             int64_t num_micro_batches) {
  const int64_t p = num_stages, v = num_chunks, total = num_micro_batches * v;
  if (v == 1) return {max_in_flight(p, stage, num_micro_batches)};
  const InterleavedSteps steps{p, v};
  const int64_t warmup = interleaved_warmup(p, stage, v, num_micro_batches);
  std::vector<int64_t> now(static_cast<size_t>(v), 0), most(static_cast<size_t>(v), 0);
  const auto forward = [&](int64_t k) {
    auto c = static_cast<size_t>(steps.chunk(k, true));
    most[c] = std::max(most[c], ++now[c]);
  };
  const auto backward = [&](int64_t k) { --now[static_cast<size_t>(steps.chunk(k, false))]; };
  // The schedule's order of steps (see forward_backward_pipelining_with_interleaving).
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t i = 0; i < total - warmup; ++i) {
    forward(warmup + i);
    backward(i);
  }
  return most;
}

void forward_backward_pipelining_with_interleaving(P2PCommunicator& p2p, int64_t num_chunks,
                                                   int64_t num_micro_batches,
                                                   PipelineBuffers& buffers,
                                                   const ChunkForwardStep& forward_step,
                                                   const ChunkBackwardStep& backward_step) {
  const int64_t p = p2p.num_stages(), r = p2p.stage(), v = num_chunks, m = num_micro_batches;
  MTNLG_CHECK_MSG(p > 1 && v > 1 && m > 0 && m % p == 0,
                  "the interleaved schedule needs 2 or more stages and chunks and a multiple of "
                  "the stages in micro-batches; got "
                      << p << " stages, " << v << " chunks, " << m << " micro-batches");
  MTNLG_CHECK(buffers.input.defined() && buffers.output_grad.defined());
  const InterleavedSteps steps{p, v};
  const bool first = p2p.is_first_stage(), last = p2p.is_last_stage();
  const int64_t total = m * v;
  const int64_t num_warmup = interleaved_warmup(p, r, v, m);
  const int64_t num_steady = total - num_warmup;
  const bool all_warmup = num_warmup == total;
  Tensor& input = buffers.input;
  Tensor& output_grad = buffers.output_grad;
  const Tensor none;

  // Forward step k: chunk 0 on the first stage reads its own data; the last virtual stage keeps
  // its loss and sends nothing.
  const auto forward = [&](int64_t k) {
    const int64_t c = steps.chunk(k, true);
    const Tensor out = forward_step(c, steps.micro(k), first && c == 0 ? none : input);
    return last && c == v - 1 ? none : out;
  };
  const auto backward = [&](int64_t k) {
    const int64_t c = steps.chunk(k, false);
    const Tensor grad = backward_step(c, steps.micro(k), last && c == v - 1 ? none : output_grad);
    return first && c == 0 ? none : grad;
  };

  // Warm-up. The first forward's input, unless it is chunk 0 on the first stage.
  if (!first) p2p.ring_exchange(none, none, true, input, false, output_grad);
  for (int64_t k = 0; k < num_warmup; ++k) {
    const Tensor output = forward(k);
    const bool recv_prev = !(first && steps.chunk(k + 1, true) == 0) && k + 1 < total;
    // The last warm-up step also fetches the first backward's gradient.
    const bool recv_next = k == num_warmup - 1 && !all_warmup && !last;
    p2p.ring_exchange(output, none, recv_prev, input, recv_next, output_grad);
  }

  // Steady: one forward, one backward, one exchange.
  for (int64_t i = 0; i < num_steady; ++i) {
    const int64_t fk = i + num_warmup, bk = i;
    const Tensor output = forward(fk);
    const Tensor input_grad = backward(bk);
    bool recv_prev = true, recv_next = true;
    if (first) {
      // The next forward on the first stage is chunk 0 (own data) after the last chunk's turn.
      if (steps.chunk(fk - (p - 1), true) == v - 1) recv_prev = false;
    }
    if (last) {
      if (steps.chunk(bk - (p - 1), false) == 0) recv_next = false;
    }
    if (i == num_steady - 1) recv_prev = false;
    p2p.ring_exchange(output, input_grad, recv_prev, input, recv_next, output_grad);
  }

  // Cool-down: the backwards left.
  if (all_warmup && !last) p2p.ring_exchange(none, none, false, input, true, output_grad);
  for (int64_t k = num_steady; k < total; ++k) {
    const Tensor input_grad = backward(k);
    const bool recv_next = !(last && steps.chunk(k + 1, false) == v - 1) && k + 1 < total;
    p2p.ring_exchange(none, input_grad, false, input, recv_next, output_grad);
  }
}

void forward_pipelining(P2PCommunicator& p2p, int64_t num_chunks, int64_t num_micro_batches,
                        PipelineBuffers& buffers, const ChunkForwardStep& forward_step) {
  check_buffers(p2p, buffers, false);
  Tensor& input = buffers.input;
  Tensor unused;
  const Tensor none;
  const bool first = p2p.is_first_stage(), last = p2p.is_last_stage();
  for (int64_t i = 0; i < num_micro_batches; ++i) {
    for (int64_t c = 0; c < num_chunks; ++c) {
      const bool reads_data = first && c == 0, keeps_loss = last && c == num_chunks - 1;
      if (num_chunks == 1) {
        p2p.recv_forward(input);
      } else if (!reads_data) {
        p2p.ring_exchange(none, none, true, input, false, unused);
      }
      const Tensor output = forward_step(c, i, reads_data ? none : input);
      if (num_chunks == 1) {
        p2p.send_forward(output);
      } else if (!keeps_loss) {
        p2p.ring_exchange(output, none, false, input, false, unused);
      }
    }
  }
}

}  // namespace mtnlg
