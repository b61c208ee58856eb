// GPTStage: the part of a GPT model one rank holds (a range of layers, plus the embedding on the
// first stage and the final LayerNorm + tied LM head + loss on the last), with explicit forward
// and backward per micro-batch. A single-process run is one stage holding everything.
//
// The stage owns its parameters (ParamRegistry) and the backward scratch buffers; the caller owns
// one StageActivations per micro-batch in flight (one here; several under a pipeline schedule).
// Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "model/gpt_config.h"
#include "model/loss_sum.h"
#include "model/param_registry.h"
#include "model/transformer_layer.h"
#include "model/vocab_parallel.h"
#include "parallel/communicator.h"

namespace mtnlg {

struct StageActivations {
  int64_t batch = 0;             // micro-batch size b
  int64_t chunk = 0;             // the model chunk these are for (StageSpec::num_chunks)
  uint64_t micro_batch_id = 0;   // global micro-batch number: selects the dropout streams
  Tensor tokens;                 // i32 [b, s] (first stage)
  Tensor targets;                // i32 [b, s] (last stage)
  std::vector<Tensor> residual;  // [b, s, h] each: residual[k] enters the chunk's layer k; the last
                                 // one is the stage output (sequence parallel: [n/tp, h], this
                                 // rank's token rows, as the LayerNorm statistics below)
  std::vector<LayerActivations> layers;  // per local layer; none when checkpointing (the stage's
                                         // one recompute buffer serves every micro-batch)
  Tensor lnf_out, lnf_mean, lnf_rstd;    // final LayerNorm (last stage); lnf_out has every row
                                         // (sequence parallel: all-gathered for the LM head)
  Tensor logits;                         // [b*s, V_pad/tp]; overwritten by dL/dlogits in backward
  VocabParallelCEContext ce;             // tp > 1: the cross entropy's row max and sum-exp
  // False (make_activations' `head`): the last chunk's forward stops at the final LayerNorm
  // (lnf_out) and returns 0, no logits, loss or backward (scoring takes the head on the rows it
  // needs).
  bool head = true;
};

// Called by GPTStage::backward as each parameter's gradient becomes final for that call (no
// later step of the same backward adds to it), so a caller can start reducing it while backward
// goes on (parallel/grad_sync.h). Order: the final LayerNorm (weight, bias) and, on a last
// stage without the embedding, the word embeddings; then each local layer's parameters in
// reverse registration order, last layer first; then the position and word embeddings.
// Every parameter of the chunk the backward ran is reported exactly once (with one chunk: every
// parameter of the stage); a caller reports a chunk's on its last micro-batch.
using GradReadyHook = std::function<void(const Param&)>;

class GPTStage {
 public:
  // seed: the run's seed, used for dropout masks (and by init_weights' caller). tensor: the
  // tensor-parallel group of config.tp_size ranks (borrowed, outliving the stage; null at tp 1).
  // grad_pad_multiple: the gradient buffer's length is padded to a multiple of it (ZeRO-1's data
  // size: its reduce-scatter reads the buffer in place; ParamRegistry::allocate).
  GPTStage(const GPTConfig& config, const StageSpec& stage, Backend& backend, DType dtype,
           uint64_t seed, Communicator* tensor = nullptr, int64_t grad_pad_multiple = 1);

  const GPTConfig& config() const { return config_; }
  const StageSpec& stage() const { return stage_; }
  ParamRegistry& params() { return params_; }
  Backend& backend() { return backend_; }
  DType dtype() const { return dtype_; }

  // Random init per the rules in gpt_params.h (same weights for any layout and backend).
  void init_weights(uint64_t seed);
  // One micro-batch's activations for model chunk `chunk` (forward and backward run that chunk);
  // head false: without the LM head's logits (StageActivations::head).
  StageActivations make_activations(int64_t micro_batch, int64_t chunk = 0, bool head = true) const;

  // One micro-batch forward. First stage: `input` is i32 tokens [b, s]; otherwise activations
  // [b, s, h] (sequence parallel: this rank's [n/tp, h], as the stage output; see
  // activation_shape). Last stage: `targets` i32 [b, s], returns the summed token loss (double);
  // otherwise returns 0 and the output is acts.residual.back().
  double forward(StageActivations& acts, const Tensor& input, const Tensor& targets,
                 uint64_t micro_batch_id);
  // The same forward with the last stage's loss added into `loss` (model/loss_sum.h: summed on
  // the device, read once a step) instead of returned: the host waits for nothing here.
  void forward(StageActivations& acts, const Tensor& input, const Tensor& targets,
               uint64_t micro_batch_id, LossSum& loss);
  // Backward of the micro-batch `acts` holds. Last stage: grad_scale multiplies dL/dlogits
  // (1 / tokens of the global batch gives the mean loss); `doutput` is ignored. Otherwise
  // `doutput` is dL/d(stage output). Parameter grads accumulate. Returns dL/d(input) for a
  // stage without the embedding (valid until the next backward), else an undefined tensor.
  // on_grad_ready (optional; a trainer sets it on an iteration's last micro-batch): see
  // GradReadyHook.
  Tensor backward(StageActivations& acts, const Tensor& doutput, double grad_scale,
                  const GradReadyHook& on_grad_ready = {});

  int64_t num_local_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t num_chunks() const { return stage_.num_chunks; }
  // The shape of what stages pass each other for a micro-batch of b: [b, s, h], or this rank's
  // token rows [n/tp, h] under sequence parallelism.
  Shape activation_shape(int64_t b) const;

  // The sequence length s of the micro-batches that follow, 1 <= s <= the model's positions
  // (scoring runs requests of many lengths; the recipe's seq_length is the default). Activations
  // made before stay at their length: make new ones. Sequence parallelism needs s * b to divide
  // by tp (checked when activations are made).
  void set_sequence_length(int64_t s);

  // Training mode applies the config's dropout; evaluation mode (false) turns it off, as
  // Megatron-LM's model.eval() does.
  void set_training(bool training);
  bool training() const { return training_; }
  // precision: fp8's scaling state and cast buffers (null otherwise).
  Fp8Linears* fp8() { return fp8_.get(); }

 private:
  // Both forwards up to the LM head's logits; true where this chunk computes the loss (the
  // targets not yet copied in).
  bool forward_to_logits(StageActivations& acts, const Tensor& input, uint64_t micro_batch_id);
  void ensure_scratch(int64_t batch);
  // Chunk 0 of the first stage holds the embedding, the last chunk of the last stage the head.
  bool has_embedding(int64_t chunk) const { return stage_.pre_process && chunk == 0; }
  bool has_head(int64_t chunk) const {
    return stage_.post_process && chunk == stage_.num_chunks - 1;
  }
  // layers_ index of the chunk's local layer k.
  size_t layer_index(int64_t chunk, size_t k) const {
    return static_cast<size_t>(chunk * stage_.layers_per_chunk()) + k;
  }
  void ensure_sequence_parallel(int64_t batch);
  // The embedding dropout's stream, placed at this rank's first token row.
  RngStream embedding_stream(uint64_t micro_batch_id, int64_t batch) const;
  LayerActivations& layer_acts(StageActivations& acts, size_t k);
  void ensure_recompute(int64_t batch);

  GPTConfig config_;
  StageSpec stage_;
  Backend& backend_;
  DType dtype_;
  uint64_t seed_;
  Communicator* tensor_;
  VocabShard vocab_shard_;
  GPTConfig train_config_;  // config_ with the recipe's dropout, restored by set_training(true)
  bool training_ = true;
  ParamRegistry params_;
  std::unique_ptr<Fp8Linears> fp8_;  // before layers_, which point at it
  std::vector<TransformerLayer> layers_;
  // Per local layer, its parameters in reverse registration order (GradReadyHook's order).
  std::vector<std::vector<const Param*>> layer_params_;
  int64_t scratch_batch_ = 0;
  LayerScratch scratch_;
  Tensor dres_;  // [b, s, h] the residual stream's gradient, carried down the layers
  int64_t sp_batch_ = 0;
  SequenceParallelBuffers sp_;  // sequence parallelism's full-size buffers (else undefined)
  // Activation checkpointing: one layer's activations, written by every forward and recomputed
  // layer by layer in backward, so one buffer serves all micro-batches in flight.
  int64_t recompute_batch_ = 0;
  LayerActivations recompute_;
};

}  // namespace mtnlg
