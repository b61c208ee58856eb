#include "cmd/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "core/cpu/matmul_bf16.h"
#include "core/cuda/attention_workspace.h"
#include "core/cuda/column_sum_plan.h"
#include "core/cuda/device_overheads.h"
#include "core/cuda/gemm_fp8_plan.h"
#include "core/device_peak.h"
#include "core/status.h"
#include "model/fp8_linear.h"
#include "model/gpt_flops.h"
#include "model/gpt_params.h"
#include "optim/lr_schedule.h"
#include "parallel/pipeline_schedule.h"

namespace mtnlg {

namespace {

constexpr int64_t kI32Bytes = 4;
constexpr int64_t kF32Bytes = 4;
constexpr int64_t kF64Bytes = 8;  // the scalar and cross-entropy reductions are f64

int64_t activation_bytes(Precision p) {
  return p == Precision::kFP32 ? 4 : 2;
}

// LayerNorm statistics (mean, rstd) stay fp32 under bf16/fp16 (acc_dtype).
int64_t statistic_bytes(Precision) {
  return kF32Bytes;
}

// Parameters one tensor-parallel rank holds of a stage: the registry's own specs, each split
// tensor divided by tp (the specs' local shapes are the unsplit ones until tensor parallelism
// lands in the model).
int64_t stage_parameters(const GPTConfig& config, const StageSpec& spec, int64_t tp) {
  ParamRegistry registry;
  register_gpt_params(registry, config, spec);
  int64_t n = 0;
  for (const auto& p : registry.params()) {
    const int64_t numel = shape_numel(p.spec.global_shape);
    n += p.spec.partition_dim >= 0 ? numel / tp : numel;
  }
  return n;
}

// Model chunks per stage (the model's condition, gpt_params.cc gpt_config_from).
int64_t chunks(const Recipe& r) {
  return r.parallel.pipeline > 1 ? r.parallel.virtual_pipeline : 1;
}

// Sequence parallelism in effect (the model's condition, gpt_params.cc gpt_config_from).
bool sequence_parallel(const Recipe& r) {
  return r.parallel.sequence_parallel && r.parallel.tensor > 1;
}

// Token rows of a micro-batch of b that one tensor rank holds in the residual stream
// (GPTConfig::local_rows): all b*s, or b*s/tp under sequence parallelism.
int64_t local_rows(const Recipe& r, int64_t b, int64_t tp) {
  return sequence_parallel(r) ? b * r.model.seq_length / tp : b * r.model.seq_length;
}

// Bytes of one micro-batch's StageActivations except the logits (gpt_stage.cc make_activations).
int64_t stage_activation_bytes(const Recipe& r, int64_t b, int64_t tp, int64_t local_layers,
                               bool first, bool last, bool checkpointed) {
  const int64_t rows = b * r.model.seq_length, h = r.model.hidden_size;
  const int64_t mine = local_rows(r, b, tp);
  const int64_t e = activation_bytes(r.precision);
  int64_t bytes = (local_layers + 1) * mine * h * e;  // residual[k]: each layer's input + output
  const int64_t saved_layers = checkpointed ? 0 : local_layers;  // else one buffer per stage
  bytes += saved_layers * layer_activation_bytes(r, b, tp);
  if (first) bytes += rows * kI32Bytes;  // tokens
  if (last)  // targets, lnf out (every row: the head's input), mean, rstd (this rank's rows)
    bytes += rows * kI32Bytes + rows * h * e + 2 * mine * statistic_bytes(r.precision);
  // The vocab-parallel cross entropy's row max and [2, rows] sums, f64 (vocab_parallel_ce_allocate)
  if (last && tp > 1) bytes += 3 * rows * kF64Bytes;
  return bytes;
}

}  // namespace

int64_t MemoryTerms::total() const {
  return weights + gradients + master_weights + adam_moments + activations + workspace;
}

namespace {

std::pair<const char*, int64_t> largest_term(const MemoryTerms& m) {
  const std::array<std::pair<const char*, int64_t>, 6> terms = {
      {{"weights", m.weights},
       {"gradients", m.gradients},
       {"master_weights", m.master_weights},
       {"adam_moments", m.adam_moments},
       {"activations", m.activations},
       {"workspace", m.workspace}}};
  auto best = terms[0];
  for (const auto& t : terms)
    if (t.second > best.second) best = t;
  return best;
}

}  // namespace

std::string MemoryTerms::largest() const {
  return largest_term(*this).first;
}
int64_t MemoryTerms::largest_bytes() const {
  return largest_term(*this).second;
}

int64_t layer_activation_elements(const Recipe& r, int64_t b, int64_t tp) {
  const int64_t s = r.model.seq_length, h = r.model.hidden_size, f = r.model.ffn_hidden_size;
  const int64_t a = r.model.num_attention_heads, rows = b * s;
  // Replicated over tensor ranks (sequence parallel: this rank's rows only): ln1_out, h1,
  // ln2_out [b,s,h] and the four LayerNorm statistics [b*s]. Split: qkv [b,s,3h], attn_out
  // [b,s,h] (the local heads' output, the row-parallel dense's input), fc1_out and act_out
  // [b,s,f], the attention's softmax statistics [b,a,s] (one log-sum-exp a row: nothing of
  // [s, s] is kept).
  return local_rows(r, b, tp) * (3 * h + 4) + rows * (3 * h + h + 2 * f) / tp + b * (a / tp) * s;
}

int64_t layer_activation_bytes(const Recipe& r, int64_t b, int64_t tp) {
  // ln1/ln2 mean and rstd, and the attention's log-sum-exp per row: fp32 under bf16/fp16.
  const int64_t stats =
      4 * local_rows(r, b, tp) + b * (r.model.num_attention_heads / tp) * r.model.seq_length;
  return (layer_activation_elements(r, b, tp) - stats) * activation_bytes(r.precision) +
         stats * statistic_bytes(r.precision);
}

double model_flops_per_iteration(const Recipe& r, int64_t global_batch, bool recompute) {
  return static_cast<double>(global_batch) * static_cast<double>(r.model.seq_length) *
         model_flops_per_token(r.model.num_layers, r.model.hidden_size, r.model.ffn_hidden_size,
                               r.model.seq_length, r.padded_vocab_size(), recompute);
}

namespace {

// Bus bytes of one call over n ranks, rounded down as parallel/communicator.h counts them.
int64_t all_reduce_bytes(int64_t n, int64_t bytes) {
  return n > 1 ? 2 * (n - 1) * bytes / n : 0;
}
int64_t scatter_or_gather_bytes(int64_t n, int64_t bytes) {
  return n > 1 ? (n - 1) * bytes / n : 0;
}

}  // namespace

CommBytes communication_per_iteration(const Recipe& r, const Plan& plan, int64_t stage) {
  MTNLG_CHECK(0 <= stage && stage < static_cast<int64_t>(plan.stages.size()));
  const StagePlan& st = plan.stages[static_cast<size_t>(stage)];
  const int64_t tp = plan.tensor, pp = plan.pipeline, dp = plan.data, m = plan.micro_batches;
  const int64_t e = plan.activation_bytes_per_element;  // activations and gradients
  const int64_t rows = plan.micro_batch * r.model.seq_length;
  const int64_t act = rows * r.model.hidden_size * e;  // one [b, s, h] tensor
  const bool seq_par = sequence_parallel(r);
  const int64_t v = chunks(r);
  const int64_t layers = (st.last_layer - st.first_layer) * v;
  // Gradients: fp32 main gradients under bf16/fp16, reduced over data ranks in fp32 or (with
  // parallel.grad_reduce_dtype: bf16) in bf16; ZeRO-1 then all-gathers the fp32 masters' update.
  const bool mixed = r.precision != Precision::kFP32;
  const int64_t g = mixed ? kF32Bytes : e;
  const int64_t g_reduce = r.parallel.grad_reduce_dtype == Precision::kBF16 ? 2 : g;
  const int64_t wte_grad = plan.padded_vocab / tp * r.model.hidden_size * g;
  const bool zero1 = r.parallel.zero_stage == 1 && dp > 1;  // the trainer's condition
  CommBytes c;

  // Tensor group: model/transformer_layer.cc, model/linear.cc, model/gpt_stage.cc and
  // model/vocab_parallel.cc per micro-batch; optim/adamw.cc tensor_parallel_sum_squares.
  const bool recompute = r.parallel.activation_checkpointing;
  int64_t per_micro = 0;
  if (seq_par) {
    // Per layer: forward 2 all-gathers (LayerNorm outputs) and 2 reduce-scatters (row-parallel
    // outputs), recomputed with checkpointing; backward 2 all-gathers of the row-parallel output
    // gradients, 2 re-gathers of the LayerNorm outputs, 2 reduce-scatters of the column-parallel
    // input gradients, and the two LayerNorms' [2h] gradients summed.
    const int64_t ln_grads = all_reduce_bytes(tp, 2 * r.model.hidden_size * g);
    per_micro = layers * ((recompute ? 14 : 10) * scatter_or_gather_bytes(tp, act) + 2 * ln_grads);
    // Embedding: forward reduce-scatter, backward all-gather. Head: forward all-gather of the
    // final LayerNorm's output, backward reduce-scatter of its gradient, its [2h] gradients.
    if (st.embedding) per_micro += 2 * scatter_or_gather_bytes(tp, act);
    if (st.head) per_micro += 2 * scatter_or_gather_bytes(tp, act) + ln_grads;
  } else {
    per_micro = layers * (recompute ? 6 : 4) * all_reduce_bytes(tp, act);
    if (st.embedding) per_micro += all_reduce_bytes(tp, act);
    if (st.head) per_micro += all_reduce_bytes(tp, act);
  }
  if (st.head)
    per_micro +=
        all_reduce_bytes(tp, rows * kF64Bytes) + all_reduce_bytes(tp, 2 * rows * kF64Bytes);
  c.tensor = m * per_micro + all_reduce_bytes(tp, kF64Bytes);

  // Pipeline group: parallel/pipeline_schedule.cc sends (receives count nothing), then
  // cmd/trainer.cc sum_over_pipeline of the loss and of the grad norm's squares.
  if (pp > 1) {
    // Per micro-batch, each chunk sends its output on (but the last virtual stage) and its input
    // gradient back (but the first): one of each to each neighbour without interleaving.
    const int64_t neighbours = (v - (stage == pp - 1 ? 1 : 0)) + (v - (stage == 0 ? 1 : 0));
    // One [b, s, h] activation or gradient per micro-batch and neighbour (sequence parallel:
    // this rank's rows, 1/tp of it).
    c.pipeline = m * neighbours * (seq_par ? act / tp : act) + 2 * all_reduce_bytes(pp, kF64Bytes);
    // Embedding group (two ranks): the tied word embeddings' gradient.
    if (st.embedding || st.head) c.embedding = all_reduce_bytes(2, wte_grad);
  }

  // Data group: parallel/grad_sync.cc or optim/zero_optimizer.cc, cmd/trainer.cc sum_over_data.
  if (dp > 1) {
    if (zero1) {
      const int64_t padded = (st.parameters + dp - 1) / dp * dp;
      c.data = scatter_or_gather_bytes(dp, padded * g_reduce) +
               scatter_or_gather_bytes(dp, padded * g) + all_reduce_bytes(dp, 2 * kF64Bytes);
    } else {
      // GradSync rounds per bucket; exact here whenever 2(n-1)/n of a bucket's bytes is whole.
      c.data = all_reduce_bytes(dp, st.parameters * g_reduce);
    }
    c.data += all_reduce_bytes(dp, kF64Bytes);
  }
  return c;
}

namespace {

void plan_layout(const Recipe& r, const PlanOptions& o, Plan& plan) {
  plan.tensor = r.parallel.tensor;
  plan.pipeline = r.parallel.pipeline;
  plan.micro_batch = r.parallel.micro_batch_size;
  const int64_t model_parallel = plan.tensor * plan.pipeline;
  if (o.world_size > 0) {
    if (o.world_size % model_parallel != 0)
      throw invalid_argument("--world-size " + std::to_string(o.world_size) +
                                 " is not a multiple of parallel.tensor " +
                                 std::to_string(plan.tensor) + " x parallel.pipeline " +
                                 std::to_string(plan.pipeline) + " = " +
                                 std::to_string(model_parallel) + "; use a multiple of " +
                                 std::to_string(model_parallel),
                             "--world-size");
    plan.data = o.world_size / model_parallel;
    if (r.parallel.data > 0 && r.parallel.data != plan.data)
      plan.notes.push_back("parallel.data " + std::to_string(r.parallel.data) +
                           " in the recipe is replaced by --world-size " +
                           std::to_string(o.world_size) + " / (" + std::to_string(plan.tensor) +
                           " x " + std::to_string(plan.pipeline) +
                           ") = " + std::to_string(plan.data));
  } else {
    plan.data = r.parallel.data > 0 ? r.parallel.data : 1;
  }
  plan.world = model_parallel * plan.data;
  const int64_t per_step = plan.micro_batch * plan.data;
  if (r.batch.global_batch_size % per_step != 0)
    throw invalid_argument("batch.global_batch_size " + std::to_string(r.batch.global_batch_size) +
                               " is not a multiple of parallel.micro_batch_size " +
                               std::to_string(plan.micro_batch) + " x data-parallel size " +
                               std::to_string(plan.data) + " = " + std::to_string(per_step) +
                               "; change the world size or the global batch",
                           "batch.global_batch_size");
  plan.micro_batches = r.batch.global_batch_size / per_step;
  if (chunks(r) > 1 && plan.micro_batches % plan.pipeline != 0)
    throw invalid_argument(
        "batch.global_batch_size " + std::to_string(r.batch.global_batch_size) + " gives " +
            std::to_string(plan.micro_batches) +
            " micro-batches per pipeline, not a multiple of parallel.pipeline " +
            std::to_string(plan.pipeline) +
            ": the interleaved schedule (parallel.virtual_pipeline > 1) runs micro-batches in "
            "groups of the pipeline size; change the global batch or the layout",
        "batch.global_batch_size");
  const RampupConfig& ramp = r.batch.rampup;
  if (ramp.start > 0 && (ramp.start % per_step != 0 || ramp.increment % per_step != 0))
    plan.notes.push_back("batch ramp: start " + std::to_string(ramp.start) + " / increment " +
                         std::to_string(ramp.increment) +
                         " are not multiples of micro x data = " + std::to_string(per_step) +
                         ", so the ramp's batches do not split into whole micro-batches at this "
                         "layout (the trainer will refuse it); the full-batch figures hold");
  if (r.parallel.sequence_parallel && plan.tensor == 1)
    plan.notes.push_back(
        "parallel.sequence_parallel: true has no effect with parallel.tensor 1 (nothing to split; "
        "Megatron-LM turns it off the same way)");
}

// The CPU backend's bf16 weight copies for one stage (core/cpu/matmul_bf16.h run_weight): every
// Backend::gemm_weight of the model (model/linear.cc, the head in model/gpt_stage.cc), forward
// (x w^T) and input gradient (dy w), on [rows] rows with bf16 outputs.
int64_t cpu_weight_copy_bytes(const Recipe& r, int threads, int64_t rows, int64_t tp,
                              int64_t layers, bool head, int64_t padded_vocab) {
  const int64_t h = r.model.hidden_size, f = r.model.ffn_hidden_size;
  const auto both = [&](int64_t out, int64_t in) {
    return cpu::MatmulBf16::linear_weight_copy_bytes(rows, out, in, threads);
  };
  // qkv [3h/tp, h], dense [h, h/tp], fc1 [f/tp, h], fc2 [h, f/tp]
  const int64_t layer = both(3 * h / tp, h) + both(h, h / tp) + both(f / tp, h) + both(h, f / tp);
  return layers * layer + (head ? both(padded_vocab / tp, h) : 0);
}

// The CUDA backend's largest column-sum scratch (core/cuda/column_sum_plan.h) over one layer's
// calls: the bias gradients of qkv and fc1 (fused with GeLU's backward) over every token of the
// micro-batch, those of dense and fc2 and the LayerNorms' two sums over the residual stream's
// rows (a tensor rank's share under sequence parallelism); fp32 sums.
int64_t cuda_column_sum_scratch(const Recipe& r, int64_t b, int64_t tp, int64_t element_bytes) {
  const int64_t rows = b * r.model.seq_length, local = local_rows(r, b, tp);
  const int64_t h = r.model.hidden_size, f = r.model.ffn_hidden_size;
  const auto bytes = [&](int64_t n, int64_t cols, int terms) {
    return column_sum_scratch_bytes(n, cols, element_bytes, 4, terms);
  };
  return std::max(
      {bytes(rows, 3 * h / tp, 1), bytes(rows, f / tp, 1), bytes(local, h, 1), bytes(local, h, 2)});
}

// The CUDA backend's largest FP8 operand pack (core/cuda/gemm_fp8_plan.h) over one layer's FP8
// GEMMs (model/fp8_linear.cc): each linear's forward (x [rows, in] by W [out, in]^T), input
// gradient (dy [rows, out] by W) and weight gradient (dy^T by x), rows the micro-batch's tokens
// (sequence parallelism gathers them before the column-parallel GEMMs, and the row-parallel
// ones take every row of their shard); 0 where no GEMM takes the pack.
int64_t cuda_fp8_pack_scratch(const Recipe& r, int64_t b, int64_t tp) {
  const int64_t rows = b * r.model.seq_length;
  const int64_t h = r.model.hidden_size, f = r.model.ffn_hidden_size;
  int64_t most = 0;
  const auto gemm = [&](int64_t m, int64_t n, int64_t k, int64_t a_rows, int64_t b_rows) {
    if (fp8_pack_applies(m, n, k, a_rows, b_rows)) most = std::max(most, fp8_pack_bytes(m, n, k));
  };
  // qkv [3h/tp, h], dense [h, h/tp], fc1 [f/tp, h], fc2 [h, f/tp] as [out, in]
  const int64_t shapes[4][2] = {{3 * h / tp, h}, {h, h / tp}, {f / tp, h}, {h, f / tp}};
  for (const auto& s : shapes) {
    const int64_t out = s[0], in = s[1];
    gemm(rows, out, in, rows, out);   // forward
    gemm(rows, in, out, rows, out);   // input gradient
    gemm(out, in, rows, rows, rows);  // weight gradient
  }
  return most;
}

// One rank's device overheads (core/cuda/device_overheads.h). Its NCCL communicators are those
// of parallel/cuda/nccl_communicator.h's make_nccl_groups with two or more ranks: world, tensor,
// data and data-gradients (GradSync's own), pipeline, and embedding on the first and last
// stages; the checkpoint group is a CPU group (parallel/transport.h).
DeviceOverheads device_overheads(const Plan& plan, const StagePlan& st, int64_t workspace_scratch) {
  DeviceOverheads d;
  d.cuda_context = kCudaContextEstimateBytes;
  d.blas_workspace = kBlasWorkspacePlanBytes;
  d.kernel_scratch = workspace_scratch + kCudaBackendScratchBytes;
  const bool ends = st.embedding || st.head;
  d.nccl_communicators = (plan.world > 1) + (plan.tensor > 1) + 2 * (plan.data > 1) +
                         (plan.pipeline > 1) + (plan.pipeline > 1 && ends);
  d.nccl_buffers = d.nccl_communicators * kNcclCommunicatorEstimateBytes;
  return d;
}

void plan_memory(const Recipe& r, const PlanOptions& o, Plan& plan) {
  const GPTConfig config = gpt_config_from(r);
  const int64_t tp = plan.tensor, pp = plan.pipeline, dp = plan.data;
  const int64_t b = plan.micro_batch, rows = b * r.model.seq_length, h = r.model.hidden_size;
  const int64_t f = r.model.ffn_hidden_size, e = plan.activation_bytes_per_element;
  // The CUDA attention's workspace: core/cuda/attention_workspace.h, the formula the kernels use
  // (the flash kernels' per-row delta, or the blocked kernels' fp32 scores of one sequence) for
  // the sequences of one call: the micro-batch's, or one under tensor parallelism with attention
  // dropout, where the layer calls attention a sequence at a time (each its own stream offset,
  // model/transformer_layer.cc). Every CUDA switch is read here as the backend reads them, so
  // that a misspelling of any is an error in --dry-run too; the attention kernels' choice sizes
  // the scratch.
  const int64_t heads = r.model.num_attention_heads;
  const bool per_sequence = tp > 1 && r.model.attention_dropout > 0;
  const AttentionChoice attention = cuda_switches(r.model.attention_backend).attention;
  plan.cuda_attention_scratch_bytes =
      cuda_attention_scratch(per_sequence ? 1 : b, heads / tp, r.model.seq_length, h / heads, e,
                             r.model.attention_dropout > 0, attention);
  plan.cuda_attention_kernels = attention_kernels_description(
      attention, per_sequence ? 1 : b, heads / tp, r.model.seq_length, h / heads, e);
  plan.cuda_column_sum_scratch_bytes = cuda_column_sum_scratch(r, b, tp, e);
  plan.cuda_fp8_pack_bytes = r.precision == Precision::kFP8 ? cuda_fp8_pack_scratch(r, b, tp) : 0;
  const bool mixed = r.precision != Precision::kFP32;
  const int64_t v = chunks(r);
  const int64_t layers_per_stage = r.model.num_layers / pp, layers_per_chunk = layers_per_stage / v;
  plan.memory_limit_bytes = static_cast<int64_t>(o.gpu_memory_gb * 1024.0 * 1024.0 * 1024.0);
  for (int64_t i = 0; i < pp; ++i) {
    StagePlan st;
    st.index = i;
    st.first_layer = i * layers_per_chunk;
    st.last_layer = st.first_layer + layers_per_chunk;
    st.embedding = i == 0;
    st.head = i == pp - 1;
    st.parameters = stage_parameters(config, pipeline_stage(config, pp, i), tp);
    const bool zero1 = r.parallel.zero_stage == 1;
    st.optimizer_shard = zero1 ? (st.parameters + dp - 1) / dp : st.parameters;
    // Activation sets: per chunk, its micro-batches in flight under the schedule (the trainer
    // allocates exactly these), each holding that chunk's layers; the embedding's extras in
    // chunk 0, the head's in the last one.
    const std::vector<int64_t> sets = max_in_flight_per_chunk(pp, i, v, plan.micro_batches);
    int64_t sets_full = 0, sets_checkpointed = 0;
    for (int64_t c = 0; c < v; ++c) {
      const bool emb = st.embedding && c == 0, head = st.head && c == v - 1;
      const int64_t full = stage_activation_bytes(r, b, tp, layers_per_chunk, emb, head, false);
      const int64_t ckpt = stage_activation_bytes(r, b, tp, layers_per_chunk, emb, head, true);
      st.in_flight += sets[static_cast<size_t>(c)];
      sets_full += sets[static_cast<size_t>(c)] * full;
      sets_checkpointed += sets[static_cast<size_t>(c)] * ckpt;
      st.activation_bytes_full = std::max(st.activation_bytes_full, full);
      st.activation_bytes_checkpointed = std::max(st.activation_bytes_checkpointed, ckpt);
    }
    st.logits_bytes = st.head ? rows * (plan.padded_vocab / tp) * e : 0;
    // LayerScratch dh, dln [b,s,h], dattn [b,s,h/tp], dqkv [b,s,3h/tp], dact [b,s,f/tp] and the
    // stage's residual gradient dres [b,s,h] (gpt_stage.cc ensure_scratch); sequence parallel:
    // dh, dln, dres over this rank's rows, plus SequenceParallelBuffers: gathered and partial
    // [b,s,h], ln_grads [2h] in the gradients' dtype (gpt_stage.cc ensure_sequence_parallel).
    const int64_t mine = local_rows(r, b, tp);
    st.scratch_bytes = (mine * 3 * h + rows * (h + 3 * h + f) / tp) * e;
    if (sequence_parallel(r))
      st.scratch_bytes += 2 * rows * h * e + 2 * h * (mixed ? kF32Bytes : e);
    st.recompute_bytes = r.parallel.activation_checkpointing ? layer_activation_bytes(r, b, tp) : 0;
    // Interleaved: every stage receives both ways (the ring wraps around).
    st.receive_bytes = (v > 1 ? 2 : (i > 0 ? 1 : 0) + (i < pp - 1 ? 1 : 0)) * mine * h * e;
    // ZeRO-1 with data > 1 (the trainer's condition) reduce-scatters the gradient buffer in
    // place, padded to S * dp elements, into the partition [S], S = ceil(parameters / dp), in the
    // gradient dtype (parallel/grad_sync.h).
    const bool scatter = r.parallel.zero_stage == 1 && dp > 1;
    const int64_t grad_bytes = mixed ? kF32Bytes : e;
    const int64_t grad_elements = scatter ? st.optimizer_shard * dp : st.parameters;
    st.reduce_scatter_bytes = scatter ? st.optimizer_shard * grad_bytes : 0;
    if (r.parallel.grad_reduce_dtype == Precision::kBF16 && grad_bytes == kF32Bytes && dp > 1)
      st.reduce_staging_bytes = 2 * (scatter ? st.optimizer_shard * (dp + 1) : st.parameters);

    // fp8's linear layers multiply their cast copies (no weight copies); its head is bf16's.
    if (o.device == Device::kCPU &&
        (r.precision == Precision::kBF16 || r.precision == Precision::kFP8))
      st.weight_copy_bytes = cpu_weight_copy_bytes(
          r, o.threads, rows, tp, r.precision == Precision::kFP8 ? 0 : layers_per_stage, st.head,
          plan.padded_vocab);
    if (r.precision == Precision::kFP8) {
      const Fp8Linears::BufferSizes n = Fp8Linears::buffer_elements(config, b);
      // The three bf16 cast buffers, and delayed scaling's amax words (4 bytes a tensor).
      st.fp8_cast_bytes = 2 * (n.x + n.w + n.dy);
      if (r.fp8.scaling == Fp8ScalingMode::kDelayed)
        st.fp8_cast_bytes += 4 * Fp8Linears::amax_words(layers_per_stage);
      // fp8.cache_weights: every local linear weight's cast, kept through an iteration.
      st.fp8_weight_cache_bytes =
          2 * Fp8Linears::weight_cache_elements(config, layers_per_stage, r.fp8);
    }

    MemoryTerms& m = st.memory;
    m.weights = st.parameters * e;
    // Main gradients: accumulated and reduced in fp32 under bf16/fp16 (Megatron's default for
    // bf16, its main_grad buffer), in the model dtype otherwise.
    m.gradients = grad_elements * grad_bytes;
    m.master_weights = mixed ? st.optimizer_shard * kF32Bytes : 0;
    m.adam_moments = 2 * st.optimizer_shard * (mixed ? kF32Bytes : e);
    m.activations = r.parallel.activation_checkpointing ? sets_checkpointed : sets_full;
    // The last stage holds min(1, m) = 1 micro-batch in flight: one logits buffer.
    // ... and the step's summed loss, one f64 on every stage (model/loss_sum.h, the trainer's).
    m.workspace = st.logits_bytes + st.scratch_bytes + st.recompute_bytes + st.receive_bytes +
                  st.reduce_scatter_bytes + st.reduce_staging_bytes + st.weight_copy_bytes +
                  st.fp8_cast_bytes + st.fp8_weight_cache_bytes + kF64Bytes;
    if (o.device == Device::kCUDA)
      st.device = device_overheads(
          plan, st,
          std::max({plan.cuda_attention_scratch_bytes, plan.cuda_column_sum_scratch_bytes,
                    plan.cuda_fp8_pack_bytes}));
    plan.stages.push_back(st);
  }
  for (const auto& st : plan.stages) {
    if (st.memory.total() > plan.worst().memory.total()) plan.worst_stage = st.index;
    if (st.device_total() > plan.worst_device().device_total()) plan.worst_device_stage = st.index;
  }
  plan.fits = plan.worst_device().device_total() <= plan.memory_limit_bytes;
}

void plan_schedule(const Recipe& r, Plan& plan) {
  const LrSchedule lr(r.optimizer, r.schedule);
  const auto row = [&](std::string label, int64_t tokens) {
    ScheduleRow x;
    x.label = std::move(label);
    x.tokens = tokens;
    x.global_batch = ramp_global_batch(r.batch, tokens);
    x.micro_batches_per_rank =
        static_cast<double>(x.global_batch) / static_cast<double>(plan.micro_batch * plan.data);
    x.lr = lr.lr_at(tokens);
    plan.schedule.push_back(x);
  };
  const RampupConfig& ramp = r.batch.rampup;
  if (ramp.start > 0) {
    // The batch becomes start + k * increment at ceil(k * tokens / n) consumed tokens.
    const int64_t n = (r.batch.global_batch_size - ramp.start) / ramp.increment;
    std::vector<int64_t> ks = {0, n / 4, n / 2, 3 * n / 4, n};
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (int64_t k : ks)
      row("ramp step " + std::to_string(k) + "/" + std::to_string(n),
          mul_div_ceil(k, ramp.tokens, n));
  }
  if (r.schedule.warmup_tokens > 0) row("warmup end", r.schedule.warmup_tokens);
  for (int q = 1; q <= 4; ++q) row(std::to_string(25 * q) + "% of training", plan.tokens * q / 4);
  std::stable_sort(plan.schedule.begin(), plan.schedule.end(),
                   [](const ScheduleRow& a, const ScheduleRow& b) { return a.tokens < b.tokens; });
}

}  // namespace

GpuSpec gpu_spec(const std::string& name) {
  // The one table of datasheet peaks (core/device_peak.h), also behind the metrics' mfu.
  if (const auto d = device_spec_from_key(name))
    return {name == "a100"   ? "A100"
            : name == "h100" ? "H100"
                             : "H200",
            d->memory_gb, d->bf16_tflops, d->tf32_tflops};
  throw invalid_argument("--gpu " + name +
                             " is not a GPU the planner knows; give a100, h100 or "
                             "h200, or --gpu-memory-gb and --peak-tflops",
                         "--gpu");
}

Plan make_plan(const Recipe& r, const PlanOptions& o) {
  if (!(o.gpu_memory_gb > 0.0))
    throw invalid_argument("--gpu-memory-gb must be positive, e.g. 80", "--gpu-memory-gb");
  if (!(o.utilization > 0.0 && o.utilization <= 1.0))
    throw invalid_argument("--utilization must be in (0, 1], e.g. 0.4", "--utilization");
  Plan plan;
  plan_layout(r, o, plan);
  plan.parameters = gpt_parameter_count(gpt_config_from(r));
  plan.padded_vocab = r.padded_vocab_size();
  plan.activation_bytes_per_element = static_cast<int>(activation_bytes(r.precision));
  plan_memory(r, o, plan);
  for (StagePlan& st : plan.stages)
    st.communication = communication_per_iteration(r, plan, st.index);

  const int64_t global = r.batch.global_batch_size;
  plan.flops_per_iteration = model_flops_per_iteration(r, global, true);
  plan.flops_per_iteration_no_recompute = model_flops_per_iteration(r, global, false);
  const double tokens_per_iter = static_cast<double>(r.tokens_per_iteration());
  plan.flops_per_token =
      (r.parallel.activation_checkpointing ? plan.flops_per_iteration
                                           : plan.flops_per_iteration_no_recompute) /
      tokens_per_iter;
  plan.bubble_fraction = pipeline_bubble_fraction(plan.pipeline, chunks(r), plan.micro_batches);

  const RunLength run = run_length(r);
  plan.iterations = run.iterations;
  plan.tokens = run.tokens;
  plan_schedule(r, plan);

  const double world = static_cast<double>(plan.world), day = 86400.0;
  // No device comes within 100x of 1e5 TFLOP/s: a figure past it is a typo (a time in hours, a
  // peak in FLOP/s), and printing 1e62 TFLOP/s would pass it on.
  constexpr double kMaxTflops = 1e5;
  if (o.peak_tflops > kMaxTflops)
    throw invalid_argument(fmt::format("--peak-tflops {:.4g} is more than 1e5 TFLOP/s per GPU; "
                                       "give one GPU's peak in TFLOP/s (e.g. 989 for an H100 "
                                       "in bf16)",
                                       o.peak_tflops),
                           "--peak-tflops");
  if (o.iteration_time_s > 0.0) {
    plan.tflops_per_gpu = plan.flops_per_iteration / (o.iteration_time_s * world) / 1e12;
    if (!(*plan.tflops_per_gpu <= kMaxTflops))
      throw invalid_argument(
          fmt::format("--iteration-time {:.4g} s would mean {:.4g} TFLOP/s per GPU, more than "
                      "1e5: give the measured seconds per iteration at the full batch",
                      o.iteration_time_s, *plan.tflops_per_gpu),
          "--iteration-time");
    // Iteration time scales with the batch during the ramp: time per token is constant.
    plan.days_at_iteration_time =
        static_cast<double>(plan.tokens) / tokens_per_iter * o.iteration_time_s / day;
  }
  if (o.peak_tflops > 0.0) {
    const double total_flops = plan.flops_per_token * static_cast<double>(plan.tokens);
    plan.days_to_train = total_flops / (world * o.peak_tflops * 1e12 * o.utilization) / day;
  }
  return plan;
}

}  // namespace mtnlg
