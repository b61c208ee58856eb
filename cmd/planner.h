// Planner: the arithmetic behind `mtnlg-train --dry-run` ("plan before you spend"). From a
// Recipe and a layout it derives, without allocating anything: parameters per pipeline stage
// and tensor shard, per-rank memory (weights, gradients, fp32 master weights, Adam moments,
// activations of the micro-batches a 1F1B stage holds in flight, workspace) against the GPU's
// memory, model FLOPs per iteration (the MT-NLG paper's formula), the pipeline bubble, the bytes
// each rank sends per iteration and process group, the batch ramp and LR schedule, and the
// length of the run counted with the ramp.
//
// The memory terms follow exactly what the code allocates (model/gpt_stage.cc make_activations,
// model/transformer_layer.cc LayerActivations and LayerScratch, model/param_registry.cc, the
// optimizer's moments, the pipeline's receive buffers and ZeRO-1's reduce-scatter buffers), so
// the prediction is each rank's measured Backend peak_bytes() (on the CPU, in bf16, with the GEMM
// weight copies the CPU backend keeps: StagePlan::weight_copy_bytes). On a GPU the process holds
// more beyond the tensors: StagePlan::device (the CUDA context, the BLAS workspace, attention's
// scratch, NCCL's buffers; estimates where they are not ours to size), counted when judging
// whether the plan fits. Not counted: allocator fragmentation.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/recipe.h"
#include "core/tensor.h"
#include "optim/batch_ramp.h"

namespace mtnlg {

struct PlanOptions {
  int64_t world_size = 0;         // > 0: parallel.data = world / (tensor * pipeline)
  double gpu_memory_gb = 80.0;    // memory of one device, in GiB (2^30 bytes)
  double iteration_time_s = 0.0;  // > 0: a measured iteration time at the full batch
  double peak_tflops = 0.0;       // > 0: the device's peak TFLOP/s in the run's precision
  double utilization = 0.4;       // fraction of peak_tflops the run achieves
  // Names the peak in the text plan ("A100 bf16"), when a --gpu default supplied it.
  std::string peak_source;
  // Where the ranks train: the memory plan follows that backend's allocations (the CPU backend
  // in bf16 adds its GEMM weight copies, StagePlan::weight_copy_bytes).
  Device device = Device::kCUDA;
  // The CPU backend's threads per rank (<= 0: every core): oneDNN sizes the bf16 weight copies
  // for the threads it splits a product over.
  int threads = 0;
  // --dry-run's data check (cmd/train_main.cc): each data.blend prefix opened and counted, in
  // blend order; data_checked false under --no-data-check.
  struct Dataset {
    std::string prefix;
    double weight = 0;
    int64_t documents = 0, tokens = 0;
  };
  std::vector<Dataset> data;
  bool data_checked = false;
};

// Bytes one rank holds, by what holds them.
struct MemoryTerms {
  int64_t weights = 0;         // parameters in the model dtype
  int64_t gradients = 0;       // one gradient per parameter, in the model dtype
  int64_t master_weights = 0;  // fp32 copies under bf16/fp16 (0 in fp32); ZeRO-1 shards them
  int64_t adam_moments = 0;    // exp_avg + exp_avg_sq, fp32; ZeRO-1 shards them
  int64_t activations = 0;     // per micro-batch x micro-batches in flight
  int64_t workspace = 0;  // logits (last stage), backward scratch, communication buffers, weight
                          // copies (the CPU in bf16)

  int64_t total() const;
  // The largest term: its name ("weights", "gradients", "master_weights", "adam_moments",
  // "activations", "workspace") and its bytes.
  std::string largest() const;
  int64_t largest_bytes() const;
};

// On a GPU, what one rank's process holds beyond its tensors (MemoryTerms): the figures of
// core/cuda/device_overheads.h. All zero in a plan for the CPU.
struct DeviceOverheads {
  int64_t cuda_context = 0;        // estimate: the context and the kernels it loads
  int64_t blas_workspace = 0;      // cuBLAS's and cuBLASLt's one workspace (exact, at most)
  int64_t kernel_scratch = 0;      // attention's scratch and the CUDA backend's own (8 KiB)
  int64_t nccl_communicators = 0;  // this rank's NCCL communicators of two or more ranks
  int64_t nccl_buffers = 0;        // estimate: nccl_communicators x one communicator's buffers

  int64_t total() const { return cuda_context + blas_workspace + kernel_scratch + nccl_buffers; }
};

// Bytes one rank sends, per process group (parallel/topology.h), counted as the communicators
// count them (parallel/communicator.h bytes_sent, the nccl-tests bus-bandwidth convention).
// world: the world group (the planner predicts none there during training).
struct CommBytes {
  int64_t tensor = 0, pipeline = 0, data = 0, embedding = 0, world = 0;

  int64_t total() const { return tensor + pipeline + data + embedding + world; }
};

// One pipeline stage, as held by each of its tensor x data ranks.
struct StagePlan {
  int64_t index = 0;
  int64_t first_layer = 0, last_layer = 0;  // layers [first, last)
  bool embedding = false;                   // word + position embeddings (first stage)
  bool head = false;            // final LayerNorm + the tied LM head's copy of the word embeddings
  int64_t parameters = 0;       // held by one rank (its tensor shard of this stage)
  int64_t optimizer_shard = 0;  // parameters whose master weights and moments it updates
  int64_t in_flight = 0;        // micro-batches 1F1B keeps alive: min(pipeline - index, m)
  // Bytes of one micro-batch's saved activations (StageActivations without the logits).
  int64_t activation_bytes_full = 0;          // every layer's LayerActivations kept
  int64_t activation_bytes_checkpointed = 0;  // layer inputs only
  int64_t logits_bytes = 0;                   // [b*s, V_pad/tp] (last stage)
  int64_t scratch_bytes = 0;                  // LayerScratch + the residual gradient
  // With checkpointing: the stage's one LayerActivations buffer that every micro-batch's forward
  // and backward recompute use (gpt_stage.h), counted once in the workspace; 0 without.
  int64_t recompute_bytes = 0;
  // Pipeline receive buffers, one activation [b, s, h] from the previous stage (all but the
  // first) and one gradient from the next (all but the last): parallel/pipeline_schedule.h.
  int64_t receive_bytes = 0;
  // ZeRO-1's reduce-scatter (data > 1): the rank's partition of the gradients' sum [S], in the
  // gradient dtype (parallel/grad_sync.cc; the gradient buffer itself, padded to S x data, is its
  // input, counted in the gradients).
  int64_t reduce_scatter_bytes = 0;
  // parallel.grad_reduce_dtype: bf16 with fp32 gradients and data > 1: the bf16 copy the sum
  // runs in (parallel/grad_sync.h), 2 bytes per gradient; under ZeRO-1 the padded buffer [S x
  // data] and the partition [S].
  int64_t reduce_staging_bytes = 0;
  // The CPU backend in bf16: each GEMM weight's copy in oneDNN's blocked layout, one per use
  // (forward, and backward's input gradient), held through each iteration's frozen-weights
  // window (core/backend.h); sizes asked of oneDNN for this CPU (core/cpu/matmul_bf16.h). 0 on
  // a GPU and in fp32/fp16.
  int64_t weight_copy_bytes = 0;
  // precision: fp8: the three cast buffers (bf16) its linear layers share: the largest input,
  // weight and output gradient of a layer (model/fp8_linear.h); 0 otherwise. (The scales and
  // amax histories, 3 x 4 x layers x (amax_history_len + 2) floats, live in host memory.)
  int64_t fp8_cast_bytes = 0;
  // precision: fp8 with fp8.cache_weights: each local linear weight's cast (bf16), kept through
  // an iteration's micro-batches (model/fp8_linear.h); 0 otherwise.
  int64_t fp8_weight_cache_bytes = 0;
  MemoryTerms memory;       // with the recipe's activation_checkpointing
  DeviceOverheads device;   // on a GPU; zero for the CPU
  CommBytes communication;  // sent by each of its ranks per iteration at the full batch

  // What one of its ranks needs of the device: its tensors and, on a GPU, the overheads.
  int64_t device_total() const { return memory.total() + device.total(); }
};

// One row of the schedule table.
struct ScheduleRow {
  std::string label;                    // "ramp step 3/59", "warmup end", "50%", ...
  int64_t tokens = 0;                   // consumed tokens at this point
  int64_t global_batch = 0;             // batch of the iteration that starts here
  double micro_batches_per_rank = 0.0;  // global_batch / (micro * data); not whole: a warning
  double lr = 0.0;                      // LrSchedule::lr_at(tokens)
};

struct Plan {
  // Layout.
  int64_t tensor = 1, pipeline = 1, data = 1, world = 1;
  int64_t micro_batch = 1;
  int64_t micro_batches = 1;  // m: per pipeline per iteration at the full batch
  // Model.
  int64_t parameters = 0;  // the whole model, the tied head counted once
  int64_t padded_vocab = 0;
  int activation_bytes_per_element = 4;  // 2 for bf16/fp16, 4 for fp32
  // Memory.
  std::vector<StagePlan> stages;
  int64_t worst_stage = 0;  // the stage whose ranks' tensors need the most memory
  // The stage whose ranks need the most of the device, overheads included (another stage than
  // worst_stage only when the overheads tip it: the embedding group's NCCL buffers).
  int64_t worst_device_stage = 0;
  int64_t memory_limit_bytes = 0;
  bool fits = false;  // every stage's device_total() within memory_limit_bytes
  // On a GPU, beyond each rank's tensors: the CUDA backend's scratch, attention's
  // (core/cuda/attention_workspace.h: the flash kernels' one float per row, or the blocked
  // kernels' scores of one sequence); counted, with the backend's own 8 KiB, in each stage's
  // DeviceOverheads::kernel_scratch.
  int64_t cuda_attention_scratch_bytes = 0;
  // The attention kernels the CUDA backend runs for this recipe (attention_kernels_description):
  // "flash2 (dq from stored dS)", "blocked", ...
  std::string cuda_attention_kernels;
  // The largest scratch of the CUDA backend's column sums (core/cuda/column_sum_plan.h: the
  // partial sums of a bias or LayerNorm gradient, about 2 MiB a term in bf16). The workspace is
  // one buffer, so kernel_scratch counts the largest of this, attention's and the FP8 packs'.
  int64_t cuda_column_sum_scratch_bytes = 0;
  // precision: fp8: the largest pair of FP8 operands the CUDA backend packs for cuBLASLt
  // (core/cuda/gemm_fp8_plan.h) over one layer's GEMMs, from the same workspace; 0 otherwise.
  int64_t cuda_fp8_pack_bytes = 0;
  // Compute.
  double flops_per_iteration = 0.0;  // the paper's formula (full recompute) at the full batch
  double flops_per_iteration_no_recompute = 0.0;
  double flops_per_token = 0.0;  // of the work the recipe does (recompute iff checkpointing)
  double bubble_fraction = 0.0;
  // Length of the run, with the batch ramp.
  int64_t iterations = 0;
  int64_t tokens = 0;
  std::vector<ScheduleRow> schedule;
  // From the options.
  std::optional<double> tflops_per_gpu;  // flops_per_iteration / (time * world) / 1e12
  std::optional<double> days_at_iteration_time;
  std::optional<double> days_to_train;  // at peak_tflops * utilization
  std::vector<std::string> notes;       // layout warnings (e.g. a ramp step not whole)

  const StagePlan& worst() const { return stages[static_cast<size_t>(worst_stage)]; }
  const StagePlan& worst_device() const { return stages[static_cast<size_t>(worst_device_stage)]; }
};

// A GPU --dry-run knows by name: its memory and dense peak TFLOP/s (NVIDIA's datasheets, SXM
// parts, without sparsity) for bf16/fp16 and for fp32 recipes (TF32 tensor cores).
struct GpuSpec {
  std::string name;  // "A100"
  double memory_gb = 0.0;
  double peak_tflops_16 = 0.0;  // bf16 / fp16
  double peak_tflops_32 = 0.0;  // TF32
};
// "a100" (80 GB, 312 / 156), "h100" (80 GB, 989 / 494), "h200" (141 GB, 989 / 494); throws
// invalid_argument naming --gpu otherwise.
GpuSpec gpu_spec(const std::string& name);

// Throws invalid_argument naming the numbers when the world size does not divide into
// tensor x pipeline, or the global batch into micro x data.
Plan make_plan(const Recipe& recipe, const PlanOptions& options);

// ---- the formulas, for the planner, the Trainer's metrics and the tests ----

// Model FLOPs of one iteration of `global_batch` samples of seq_length tokens: the count of
// model/gpt_flops.h (the paper's 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with recompute).
double model_flops_per_iteration(const Recipe& recipe, int64_t global_batch, bool recompute);

// Bytes each rank of pipeline stage `stage` sends in one training iteration at the full batch
// (plan.micro_batches micro-batches), per group, from what the code communicates; every tensor
// and data rank of a stage sends alike (ring collectives and P2P are symmetric). The paper's
// pattern (Megatron-LM's 3D parallelism), with a = b*s*h activation elements:
//   tensor    per micro-batch and layer 2 all-reduces of a forward (the row-parallel dense and
//             fc2, operator g) and 2 backward (the dLN of attention and MLP, operator f), 2 more
//             forward when activation checkpointing recomputes; the first stage's vocab-parallel
//             embedding all-reduce (a); the last stage's dLN_f all-reduce (a) and the
//             vocab-parallel cross entropy's row max (b*s f64) and sum-exp + target logit
//             (2*b*s f64); per iteration the grad norm's sum of squares of the shards (one f64,
//             one more on the last stage under ZeRO-1 with pp > 1 for the tied embedding's).
//   pipeline  per micro-batch a activations sent forward to stage + 1 (all but the last stage)
//             and their gradient sent back to stage - 1 (all but the first); per iteration the
//             loss and the grad norm's sum of squares (one f64 all-reduce each).
//   embedding with pp > 1, first and last stage: the tied word embeddings' gradient [V/tp, h].
//   data      the stage's gradients S: all-reduce 2(n-1)/n S, or with ZeRO-1 reduce-scatter +
//             all-gather of S padded to a multiple of n, (n-1)/n each, plus its two f64 partial
//             sums of squares (and the last stage's tied-embedding gradient all-reduce when
//             pp > 1); per iteration the loss (one f64).
// Every call is rounded down to whole bytes as the communicators count it.
CommBytes communication_per_iteration(const Recipe& recipe, const Plan& plan, int64_t stage);

// ramp_global_batch and run_length: optim/batch_ramp.h.

// Elements one micro-batch of b samples saves per transformer layer (LayerActivations: ln1_out,
// ln1 mean/rstd, qkv, attn_stats, attn_out, h1, ln2_out, ln2 mean/rstd, fc1_out, act_out), local
// to one of `tp` tensor-parallel ranks.
int64_t layer_activation_elements(const Recipe& recipe, int64_t b, int64_t tp);
// Their bytes: the precision's activation bytes, the LayerNorm and softmax statistics in fp32.
int64_t layer_activation_bytes(const Recipe& recipe, int64_t b, int64_t tp);

}  // namespace mtnlg
