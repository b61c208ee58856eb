#include "cmd/dry_run.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cmd/device_select.h"
#include "core/metrics.h"
#include "core/status.h"
#include "data/indexed_dataset.h"
#include "model/gpt_params.h"

namespace mtnlg {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string human(double v) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%s", v, units[u]);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4e", v);
  return buf;
}

std::string gib(int64_t bytes) {
  return fixed(static_cast<double>(bytes) / kGiB, 2);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

// The stages worth a column: the first, the second (the first without the embedding), the last.
std::vector<const StagePlan*> shown_stages(const Plan& plan) {
  std::vector<const StagePlan*> out = {&plan.stages.front()};
  if (plan.stages.size() > 2) out.push_back(&plan.stages[1]);
  if (plan.stages.size() > 1) out.push_back(&plan.stages.back());
  return out;
}

std::string stage_content(const StagePlan& st, int64_t chunks, int64_t pipeline) {
  // Chunk c of stage i holds virtual stage c * pipeline + i (the interleaved schedule).
  std::string s = "layers ";
  const int64_t per_chunk = st.last_layer - st.first_layer;
  for (int64_t c = 0; c < chunks; ++c) {
    if (c > 0) s += ", ";
    const int64_t first = st.first_layer + c * pipeline * per_chunk;
    s += std::to_string(first);
    s += '-';
    s += std::to_string(first + per_chunk - 1);
  }
  if (st.embedding) s += " + word embeddings [V/tp, h] + positions [P, h]";
  if (st.head) s += " + final LayerNorm";
  if (st.head && !st.embedding) s += " + the tied LM head's copy of the word embeddings [V/tp, h]";
  return s;
}

std::string supported_note(const Recipe& r) {
  try {
    check_supported(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

bool print_dry_run(const Recipe& r, const PlanOptions& o, std::ostream& out) {
  const Plan p = make_plan(r, o);
  const GPTConfig c = gpt_config_from(r);

  out << "recipe is valid\n\n";
  out << "model\n";
  out << "  parameters            " << p.parameters << " ("
      << human(static_cast<double>(p.parameters)) << "; the tied LM head counted once)\n";
  out << "  layers                " << c.num_layers << ", hidden " << c.hidden << ", heads "
      << c.heads << " (head dim " << c.head_dim() << "), ffn " << c.ffn << "\n";
  out << "  sequence              " << c.seq << " (max positions " << c.max_positions << ")\n";
  out << "  vocabulary            " << c.vocab << " padded to " << c.padded_vocab << "\n";
  out << "  device                " << (o.device == Device::kCPU ? "cpu" : "cuda")
      << " (device: " << device_choice_name(r.device)
      << "; the memory below is what that backend allocates)\n";
  out << "  precision             " << precision_name(r.precision)
      << (r.parallel.activation_checkpointing ? ", activation checkpointing" : "") << "\n\n";

  out << "layout\n";
  out << "  tensor x pipeline x data  " << p.tensor << " x " << p.pipeline << " x " << p.data
      << " = " << p.world << " ranks"
      << (o.world_size > 0 ? " (data = --world-size / (tensor x pipeline))"
                           : (r.parallel.data > 0 ? ""
                                                  : " (parallel.data unset: 1 assumed; "
                                                    "give --world-size to derive it)"))
      << "\n";
  out << "  layers per stage      " << c.num_layers / p.pipeline << "\n";
  out << "  micro-batch           " << p.micro_batch << ", m = " << p.micro_batches
      << " micro-batches per pipeline per iteration (global / (micro x data))\n";
  out << "  ZeRO stage            " << r.parallel.zero_stage << "\n";
  if (c.sequence_parallel)
    out << "  sequence parallel     token rows split over the tensor group: "
        << c.local_rows(p.micro_batch) << " of " << p.micro_batch * c.seq
        << " per rank between the GEMMs (LayerNorm, dropout, residual stream, pipeline sends)\n";
  const int64_t chunks = p.pipeline > 1 ? r.parallel.virtual_pipeline : 1;
  if (chunks > 1) {
    out << "  schedule              interleaved 1F1B, " << chunks
        << " model chunks per stage (parallel.virtual_pipeline)\n";
    out << "  pipeline bubble       (pp - 1) / (v m + pp - 1) = " << p.pipeline - 1 << " / "
        << chunks * p.micro_batches + p.pipeline - 1 << " = " << fixed(100.0 * p.bubble_fraction, 2)
        << "%\n\n";
  } else {
    out << "  pipeline bubble       (pp - 1) / (m + pp - 1) = " << p.pipeline - 1 << " / "
        << p.micro_batches + p.pipeline - 1 << " = " << fixed(100.0 * p.bubble_fraction, 2)
        << "%\n\n";
  }

  out << "parameters per rank (one tensor shard of one pipeline stage)\n";
  for (const StagePlan* st : shown_stages(p)) {
    std::string name = "stage " + std::to_string(st->index);
    if (st->index == 1 && p.pipeline > 3) name = "stages 1-" + std::to_string(p.pipeline - 2);
    out << "  " << name << std::string(name.size() < 20 ? 20 - name.size() : 1, ' ')
        << st->parameters << " (" << human(static_cast<double>(st->parameters))
        << "): " << stage_content(*st, chunks, p.pipeline) << "\n";
  }
  out << "\n";

  const auto shown = shown_stages(p);
  out << "memory per rank, GiB (stage i holds min(pp - i, m) micro-batches in flight)\n";
  out << "  " << pad("", 22);
  for (const StagePlan* st : shown) out << pad("stage " + std::to_string(st->index), 12);
  out << "\n";
  const auto line = [&](const char* name, auto get) {
    const size_t len = std::string(name).size();  // a longer label still gets one space
    out << "  " << name << std::string(len < 22 ? 22 - len : 1, ' ');
    for (const StagePlan* st : shown) out << pad(get(*st), 12);
    out << "\n";
  };
  line("weights", [](const StagePlan& s) { return gib(s.memory.weights); });
  line("gradients", [](const StagePlan& s) { return gib(s.memory.gradients); });
  line("fp32 master weights", [](const StagePlan& s) { return gib(s.memory.master_weights); });
  line("Adam moments", [](const StagePlan& s) { return gib(s.memory.adam_moments); });
  line("activations", [](const StagePlan& s) { return gib(s.memory.activations); });
  line("  micro-batches", [](const StagePlan& s) { return std::to_string(s.in_flight); });
  line("  per micro-batch", [&](const StagePlan& s) {
    return gib(r.parallel.activation_checkpointing ? s.activation_bytes_checkpointed
                                                   : s.activation_bytes_full);
  });
  line(r.parallel.activation_checkpointing ? "  (no checkpointing)" : "  (checkpointing)",
       [&](const StagePlan& s) {
         return gib(r.parallel.activation_checkpointing ? s.activation_bytes_full
                                                        : s.activation_bytes_checkpointed);
       });
  line("workspace", [](const StagePlan& s) { return gib(s.memory.workspace); });
  line("  logits", [](const StagePlan& s) { return gib(s.logits_bytes); });
  line("  backward scratch", [](const StagePlan& s) { return gib(s.scratch_bytes); });
  if (r.parallel.activation_checkpointing)
    line("  recompute buffer", [](const StagePlan& s) { return gib(s.recompute_bytes); });
  if (p.pipeline > 1)
    line("  pipeline receive", [](const StagePlan& s) { return gib(s.receive_bytes); });
  if (p.data > 1 && r.parallel.zero_stage == 1)
    line("  ZeRO-1 partition", [](const StagePlan& s) { return gib(s.reduce_scatter_bytes); });
  if (p.stages.front().reduce_staging_bytes > 0)
    line("  bf16 grad reduce", [](const StagePlan& s) { return gib(s.reduce_staging_bytes); });
  if (p.stages.front().weight_copy_bytes > 0)
    line("  weight copies", [](const StagePlan& s) { return gib(s.weight_copy_bytes); });
  if (p.stages.front().fp8_cast_bytes > 0)
    line("  fp8 cast buffers", [](const StagePlan& s) { return gib(s.fp8_cast_bytes); });
  if (p.stages.front().fp8_weight_cache_bytes > 0)
    line("  fp8 weight casts", [](const StagePlan& s) { return gib(s.fp8_weight_cache_bytes); });
  line("total", [](const StagePlan& s) { return gib(s.memory.total()); });
  const bool gpu = p.stages.front().device.total() > 0;
  if (gpu) {  // core/cuda/device_overheads.h
    line("CUDA context (est.)", [](const StagePlan& s) { return gib(s.device.cuda_context); });
    line("BLAS workspace", [](const StagePlan& s) { return gib(s.device.blas_workspace); });
    line("kernel scratch", [](const StagePlan& s) { return gib(s.device.kernel_scratch); });
    line("NCCL buffers (est.)", [](const StagePlan& s) { return gib(s.device.nccl_buffers); });
    line("  communicators",
         [](const StagePlan& s) { return std::to_string(s.device.nccl_communicators); });
    line("device total", [](const StagePlan& s) { return gib(s.device_total()); });
  }
  const StagePlan& worst = p.worst_device();
  out << "  " << (p.fits ? "fits" : "DOES NOT FIT") << ": the worst rank (stage " << worst.index
      << ") needs " << gib(worst.device_total()) << " of " << gib(p.memory_limit_bytes)
      << " GiB (--gpu-memory-gb)"
      << (gpu ? ", " + gib(worst.device.total()) + " of it beyond its tensors" : std::string())
      << "; its largest term is " << worst.memory.largest() << " ("
      << gib(worst.memory.largest_bytes()) << " GiB)\n";
  if (gpu)
    out << "  attention kernels on the GPU: " << p.cuda_attention_kernels
        << "; model.attention_backend chooses (MTNLG_CUDA_ATTENTION overrides it)\n";
  if (!p.fits)
    out << "  to fit: raise parallel.pipeline or parallel.tensor, turn on "
           "parallel.activation_checkpointing, set parallel.zero_stage: 1, or lower "
           "parallel.micro_batch_size\n";
  out << "  gradients are fp32 main gradients under bf16/fp16, else in the model dtype; ZeRO-1 "
         "shards master weights and moments over "
         "data ranks. On the CPU in bf16 the workspace holds each GEMM weight's copies in oneDNN's "
         "blocked layout (forward and input gradient; reordered once per iteration; none where "
         "oneDNN has no bf16 matmul and OpenBLAS's kernel packs the bf16 weights as it reads "
         "them). The total is "
         "the backend's measured peak of tensors. On a GPU the process holds more: the CUDA "
         "context (estimated), one cuBLAS/cuBLASLt workspace (32 MiB; 4 MiB before Hopper), "
         "kernel scratch (attention's: the FA2-style kernels, the default where they apply "
         "(bf16/fp16, head sizes 64 and 128, and 160 with MTNLG_CUDA_ATTENTION=flash2), one "
         "float per row, their dropout bits, s/8 bytes a "
         "row, and the stored dS, 2 bytes an element of [micro-batch, heads, s, s], while that is "
         "at most 1 GiB (MTNLG_CUDA_FLASH2_DQ=auto, the default; =stored always, =recompute "
         "never); the blocked kernels (elsewhere, or "
         "MTNLG_CUDA_ATTENTION=blocked) the scores of one sequence; flash, one float per row; "
         "flash2-fwd and flash2-bwd the larger of their "
         "passes', the blocked backward's or forward's sequence; or, where larger, the column "
         "sums' partials of "
         "the bias and LayerNorm gradients, about 2 MiB a term in bf16, or under precision: fp8 "
         "the largest GEMM's two operands packed as FP8 bytes for cuBLASLt; and the backend's "
         "own 8 "
         "KiB for reductions) "
         "and NCCL's buffers (estimated per communicator of "
         "two or more ranks: 32 channels of its three protocols' buffers; NVLS buffers not "
         "included); mtnlg-train logs what it measures outside its allocator. Not counted: "
         "fragmentation\n\n";

  out << "compute\n";
  out << "  model FLOPs/iteration " << sci(p.flops_per_iteration)
      << " at the full batch (the paper's 96 B s l h^2 (1 + s/6h + V/16lh), full recompute); "
      << sci(p.flops_per_iteration_no_recompute) << " without recompute\n";
  out << "  per token             " << sci(p.flops_per_token)
      << (r.parallel.activation_checkpointing ? " (with recompute)" : " (no recompute)") << "\n";
  if (p.tflops_per_gpu)
    out << "  TFLOP/s per GPU       " << fixed(*p.tflops_per_gpu, 1) << " at " << o.iteration_time_s
        << " s per iteration on " << p.world << " GPUs; " << fixed(*p.days_at_iteration_time, 1)
        << " days to train at that speed\n";
  if (p.days_to_train)
    out << "  days to train         " << fixed(*p.days_to_train, 1) << " at " << o.peak_tflops
        << " peak TFLOP/s" << (o.peak_source.empty() ? "" : " (" + o.peak_source + ")") << " x "
        << o.utilization << " utilization on " << p.world << " GPUs\n";
  out << "\n";

  out << "schedule\n";
  out << "  global batch          " << r.batch.global_batch_size
      << " samples = " << r.tokens_per_iteration() << " tokens";
  if (r.batch.rampup.start > 0)
    out << " (ramp " << r.batch.rampup.start << " -> " << r.batch.global_batch_size << " by "
        << r.batch.rampup.increment << " over " << human(static_cast<double>(r.batch.rampup.tokens))
        << " tokens)";
  out << "\n";
  out << "  iterations            " << p.iterations << " (" << human(static_cast<double>(p.tokens))
      << " tokens" << (r.batch.rampup.start > 0 ? ", counted with the batch ramp" : "") << ")\n";
  out << "  lr                    " << r.optimizer.lr << " peak, warmup "
      << human(static_cast<double>(r.schedule.warmup_tokens)) << " tokens, "
      << decay_style_name(r.schedule.decay_style) << " to " << r.optimizer.min_lr << " at "
      << human(static_cast<double>(r.schedule.decay_tokens)) << " tokens\n";
  out << "  " << pad("", 20) << pad("tokens", 12) << pad("global batch", 14)
      << pad("micro/rank", 12) << pad("lr", 12) << "\n";
  for (const ScheduleRow& row : p.schedule) {
    out << "  " << row.label << std::string(row.label.size() < 20 ? 20 - row.label.size() : 1, ' ')
        << pad(human(static_cast<double>(row.tokens)), 12)
        << pad(std::to_string(row.global_batch), 14)
        << pad(fixed(row.micro_batches_per_rank,
                     row.micro_batches_per_rank ==
                             static_cast<double>(static_cast<int64_t>(row.micro_batches_per_rank))
                         ? 0
                         : 2),
               12)
        << pad(sci(row.lr), 12) << "\n";
  }
  out << "\ndata\n";
  if (!o.data_checked) out << "  not checked (--no-data-check)\n";
  for (const PlanOptions::Dataset& d : o.data)
    out << "  " << d.prefix << "  weight " << json_number(d.weight) << ", " << d.documents
        << " documents, " << d.tokens << " tokens (" << human(static_cast<double>(d.tokens))
        << ")\n";
  for (const std::string& note : p.notes) out << "\nnote: " << note << "\n";
  const std::string unsupported_reason = supported_note(r);
  if (!unsupported_reason.empty())
    out << "\nnote: this build cannot train this recipe yet: " << unsupported_reason << "\n";
  return p.fits;
}

namespace {

// A JSON object written key by key (numbers through json_number, so they round-trip).
class JsonObject {
 public:
  JsonObject& num(const std::string& k, double v) { return raw(k, json_number(v)); }
  JsonObject& num(const std::string& k, int64_t v) { return raw(k, std::to_string(v)); }
  JsonObject& boolean(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
  JsonObject& str(const std::string& k, const std::string& v) { return raw(k, json_string(v)); }
  JsonObject& raw(const std::string& k, const std::string& json) {
    body_ += (body_.empty() ? "" : ", ") + json_string(k) + ": " + json;
    return *this;
  }
  std::string done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

std::string json_array(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "]";
}

std::string memory_json(const MemoryTerms& m) {
  return JsonObject()
      .num("weights", m.weights)
      .num("gradients", m.gradients)
      .num("master_weights", m.master_weights)
      .num("adam_moments", m.adam_moments)
      .num("activations", m.activations)
      .num("workspace", m.workspace)
      .num("total", m.total())
      .done();
}

std::string device_json(const DeviceOverheads& d) {
  return JsonObject()
      .num("cuda_context", d.cuda_context)
      .num("blas_workspace", d.blas_workspace)
      .num("kernel_scratch", d.kernel_scratch)
      .num("nccl_communicators", d.nccl_communicators)
      .num("nccl_buffers", d.nccl_buffers)
      .num("total", d.total())
      .done();
}

std::string communication_json(const StagePlan& st) {
  const CommBytes& c = st.communication;
  return JsonObject()
      .num("stage", st.index)
      .num("tensor", c.tensor)
      .num("pipeline", c.pipeline)
      .num("data", c.data)
      .num("embedding", c.embedding)
      .num("total", c.total())
      .done();
}

}  // namespace

bool print_dry_run_json(const Recipe& r, const PlanOptions& o, std::ostream& out) {
  const Plan p = make_plan(r, o);
  std::vector<std::string> stages, schedule, notes, communication, data;
  for (const PlanOptions::Dataset& d : o.data)
    data.push_back(JsonObject()
                       .str("prefix", d.prefix)
                       .num("weight", d.weight)
                       .num("documents", d.documents)
                       .num("tokens", d.tokens)
                       .done());
  for (const StagePlan& st : p.stages) {
    communication.push_back(communication_json(st));
    stages.push_back(
        JsonObject()
            .num("stage", st.index)
            .num("first_layer", st.first_layer)
            .num("last_layer", st.last_layer)
            .boolean("embedding", st.embedding)
            .boolean("head", st.head)
            .num("parameters", st.parameters)
            .num("optimizer_shard", st.optimizer_shard)
            .num("in_flight", st.in_flight)
            .num("activation_bytes_per_micro_batch", st.activation_bytes_full)
            .num("activation_bytes_per_micro_batch_checkpointed", st.activation_bytes_checkpointed)
            .num("recompute_bytes", st.recompute_bytes)
            .num("logits_bytes", st.logits_bytes)
            .num("scratch_bytes", st.scratch_bytes)
            .num("receive_bytes", st.receive_bytes)
            .num("reduce_scatter_bytes", st.reduce_scatter_bytes)
            .num("reduce_staging_bytes", st.reduce_staging_bytes)
            .num("weight_copy_bytes", st.weight_copy_bytes)
            .num("fp8_cast_bytes", st.fp8_cast_bytes)
            .num("fp8_weight_cache_bytes", st.fp8_weight_cache_bytes)
            .raw("memory_bytes", memory_json(st.memory))
            .num("memory_gb", static_cast<double>(st.memory.total()) / kGiB)
            .raw("device_overhead_bytes", device_json(st.device))
            .num("device_total_bytes", st.device_total())
            .done());
  }
  for (const ScheduleRow& row : p.schedule) {
    schedule.push_back(JsonObject()
                           .str("label", row.label)
                           .num("tokens", row.tokens)
                           .num("global_batch", row.global_batch)
                           .num("micro_batches_per_rank", row.micro_batches_per_rank)
                           .num("lr", row.lr)
                           .done());
  }
  for (const std::string& n : p.notes) notes.push_back(json_string(n));
  const StagePlan& worst = p.worst();
  JsonObject j;
  j.num("parameters", p.parameters)
      .num("padded_vocab", p.padded_vocab)
      .num("tensor_parallel", p.tensor)
      .num("pipeline_parallel", p.pipeline)
      .num("data_parallel", p.data)
      .num("world_size", p.world)
      .str("device", o.device == Device::kCPU ? "cpu" : "cuda")
      .num("micro_batch_size", p.micro_batch)
      .num("micro_batches", p.micro_batches)
      .num("parameters_per_rank", worst.parameters)
      .num("flops_per_iteration", p.flops_per_iteration)
      .num("flops_per_iteration_no_recompute", p.flops_per_iteration_no_recompute)
      .num("flops_per_token", p.flops_per_token);
  if (p.tflops_per_gpu) {
    j.num("iteration_time_s", o.iteration_time_s)
        .num("tflops_per_gpu", *p.tflops_per_gpu)
        .num("days_at_iteration_time", *p.days_at_iteration_time);
  }
  if (p.days_to_train) {
    j.num("peak_tflops", o.peak_tflops)
        .num("utilization", o.utilization)
        .num("days_to_train", *p.days_to_train);
  }
  j.num("memory_per_rank_gb", static_cast<double>(worst.memory.total()) / kGiB)
      .num("gpu_memory_gb", o.gpu_memory_gb)
      .str("gpu", o.peak_source)
      .boolean("fits", p.fits)
      .num("worst_stage", worst.index)
      .num("worst_device_stage", p.worst_device().index)
      .num("device_total_per_rank_bytes", p.worst_device().device_total())
      .str("largest_term", worst.memory.largest())
      .raw("memory_per_rank_bytes", memory_json(worst.memory))
      .num("cuda_attention_scratch_bytes", p.cuda_attention_scratch_bytes)
      .str("cuda_attention_kernels", p.cuda_attention_kernels)
      .num("cuda_column_sum_scratch_bytes", p.cuda_column_sum_scratch_bytes)
      .num("cuda_fp8_pack_bytes", p.cuda_fp8_pack_bytes)
      .num("virtual_pipeline", p.pipeline > 1 ? r.parallel.virtual_pipeline : 1)
      .num("bubble_fraction", p.bubble_fraction)
      .num("iterations", p.iterations)
      .num("tokens", p.tokens)
      .raw("schedule", json_array(schedule))
      .raw("stages", json_array(stages))
      // Bytes each rank of a stage sends per iteration, per group (planner.h CommBytes).
      .raw("communication", json_array(communication))
      .raw("notes", json_array(notes))
      // Each data.blend prefix as the data check found it; null under --no-data-check.
      .raw("data", o.data_checked ? json_array(data) : std::string("null"))
      // Where the run saves checkpoints ("" without): sweeps give each run its own.
      .str("checkpoint_dir", r.checkpoint.dir);
  const std::string reason = supported_note(r);
  j.boolean("trainable_by_this_build", reason.empty());
  if (!reason.empty()) j.str("not_trainable_because", reason);
  out << j.done() << "\n";
  return p.fits;
}

int run_dry_run(const Recipe& recipe, PlanOptions plan, const DryRunRequest& request,
                std::ostream& out) {
  plan.device = planned_device(recipe.device);
  plan.threads = request.threads;
  const GpuSpec spec = gpu_spec(request.gpu);
  if (!request.memory_given) plan.gpu_memory_gb = spec.memory_gb;
  if (!request.peak_given) {
    const bool fp32 = recipe.precision == Precision::kFP32;
    plan.peak_tflops = fp32 ? spec.peak_tflops_32 : spec.peak_tflops_16;
    plan.peak_source = spec.name + (fp32 ? " TF32" : " bf16/fp16");
  }
  plan.data_checked = request.check_data;
  for (size_t k = 0; plan.data_checked && k < recipe.data.blend.size(); ++k) {
    const BlendEntry& e = recipe.data.blend[k];
    try {
      const auto ds = IndexedDataset::open(e.prefix);
      plan.data.push_back({e.prefix, e.weight, ds->num_documents(), ds->num_tokens()});
    } catch (const Error& err) {
      throw Error(err.code(),
                  "data.blend[" + std::to_string(k) + "]: " + err.message() +
                      " (--dry-run --no-data-check plans without the data)",
                  err.context());
    }
  }
  const bool fits =
      request.json ? print_dry_run_json(recipe, plan, out) : print_dry_run(recipe, plan, out);
  if (!fits) {
    spdlog::error(
        "the plan does not fit: its worst rank needs more than {} GiB (exit {}; see the plan's "
        "memory section for what to change)",
        plan.gpu_memory_gb, kExitPlanDoesNotFit);
    return kExitPlanDoesNotFit;
  }
  return 0;
}

}  // namespace mtnlg
