#include "cmd/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "checkpoint/hf_import.h"
#include "checkpoint/manifest.h"
#include "checkpoint/saver.h"
#include "cmd/cli_parse.h"
#include "cmd/data_samples.h"
#include "cmd/memory_check.h"
#include "cmd/planner.h"
#include "cmd/tokenizer_choice.h"
#include "core/checked_math.h"
#include "core/cpu/matmul_bf16.h"
#include "core/device_peak.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/stop_signal.h"
#include "core/tensorboard.h"
#include "data/dataset_builder.h"
#include "data/loader.h"
#include "data/token_check.h"
#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "optim/adamw.h"
#include "optim/batch_ramp.h"
#include "optim/divergence.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "parallel/p2p.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/topology.h"

namespace mtnlg {

int64_t planned_iterations(const Recipe& r) {
  return run_length(r).iterations;
}

namespace {

// a + sign * b, per group.
CommBytes combine(const CommBytes& a, const CommBytes& b, int64_t sign) {
  return CommBytes{a.tensor + sign * b.tensor, a.pipeline + sign * b.pipeline,
                   a.data + sign * b.data, a.embedding + sign * b.embedding,
                   a.world + sign * b.world};
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", static_cast<long>(s / 3600),
                static_cast<long>(s / 60 % 60), static_cast<long>(s % 60));
  return buf;
}

}  // namespace

Trainer::Trainer(const Recipe& recipe, const TrainerOptions& options)
    : recipe_(recipe),
      options_(options),
      batch_at_(global_batch_by_samples(recipe.batch, recipe.model.seq_length)) {
  check_supported(recipe_);
  total_iters_ = planned_iterations(recipe_);
  if (options_.groups != nullptr) {
    data_size_ = options_.groups->data->size();
    data_rank_ = options_.groups->data->rank();
    is_logging_rank_ = options_.groups->world->rank() == 0;
  }
  if (options_.topology != nullptr) {
    pipeline_size_ = options_.topology->sizes().pipeline;
    stage_ = options_.topology->pipeline_rank();
  }
  build_layout_checks();
  select_device();  // before any data index is built: a missing GPU fails at once
  build_tasks();    // a bad eval.tasks setting fails before the data and the model are built
  // The tokenizer every checkpoint carries; a wrong one fails here, on every rank.
  if (!recipe_.checkpoint.dir.empty()) checkpoint_tokenizer_ = run_tokenizer(recipe_);
  if (is_logging_rank_) spdlog::info("resolved recipe:\n{}", recipe_to_yaml(recipe_));
  find_start_checkpoint();
  build_data();
  build_model();
  build_grad_sync();
  build_optimizer();
  build_pipeline();
  build_outputs();
}

// The layout checks that need the launched world (the data-parallel size may come from it, so
// the recipe alone could not check them).
void Trainer::build_layout_checks() {
  if (recipe_.parallel.pipeline != pipeline_size_)
    throw invalid_argument("parallel.pipeline: " + std::to_string(recipe_.parallel.pipeline) +
                               " stages but this process runs " + std::to_string(pipeline_size_) +
                               "; launch tensor x pipeline x data ranks (mpirun -np, srun -n)",
                           "parallel.pipeline");
  {
    // The data-parallel size may come from the world size, so the recipe could not check this.
    // The interleaved schedule also runs micro-batches in groups of the pipeline size.
    const bool interleaved = pipeline_size_ > 1 && recipe_.parallel.virtual_pipeline > 1;
    const int64_t step =
        recipe_.parallel.micro_batch_size * data_size_ * (interleaved ? pipeline_size_ : 1);
    const auto& ramp = recipe_.batch.rampup;
    const auto check = [&](int64_t value, const char* key) {
      if (value % step != 0)
        throw invalid_argument(
            std::string(key) + ": " + std::to_string(value) +
                " is not a multiple of parallel.micro_batch_size x data-parallel size" +
                (interleaved ? " x parallel.pipeline (the interleaved schedule, "
                               "parallel.virtual_pipeline > 1, needs a multiple of the pipeline "
                               "size in micro-batches)"
                             : "") +
                " = " + std::to_string(step) + "; change the batch or the number of ranks",
            key);
    };
    check(recipe_.batch.global_batch_size, "batch.global_batch_size");
    if (ramp.start > 0) {
      check(ramp.start, "batch.rampup.start");
      check(ramp.increment, "batch.rampup.increment");
    }
  }
  // check_supported refused the recipe's layouts; the data size may come from the world.
  if (const std::string why = cuda_graph_data_refusal(recipe_, data_size_); !why.empty())
    throw unsupported("parallel.cuda_graph: " + why + "; or set parallel.cuda_graph: false",
                      "parallel.cuda_graph");
}

// The train (and valid) datasets and loaders. Data first: a missing or bad corpus fails before
// the model takes memory. The train split is sized for the whole run; the valid split for every
// evaluation of it.
void Trainer::build_data() {
  const int64_t seq = recipe_.model.seq_length, micro = recipe_.parallel.micro_batch_size;
  const int64_t train_samples = split_num_samples(recipe_, Split::kTrain);
  check_token_ids(recipe_.data, recipe_.model.vocab_size);  // every id, once, before training
  train_data_ = build_train_dataset(recipe_.data, seq, train_samples, Split::kTrain);
  spdlog::info("train data: {} samples: {}", train_samples, train_data_->description());
  const std::string source_name = recipe_.data.blend.size() == 1
                                      ? recipe_.data.blend.front().prefix
                                      : std::to_string(recipe_.data.blend.size()) + "-way blend";
  LoaderOptions loader_options;
  loader_options.micro_batch_size = micro;
  loader_options.vocab_size = recipe_.model.vocab_size;
  loader_options.source_name = source_name;
  loader_options.data_rank = data_rank_;
  loader_options.data_size = data_size_;
  train_loader_ =
      std::make_unique<Loader>(*train_data_, loader_options, consumed_samples_, batch_at_);
  if (recipe_.eval.interval > 0) {
    const int64_t valid_samples = split_num_samples(recipe_, Split::kValid);
    valid_data_ = build_train_dataset(recipe_.data, seq, valid_samples, Split::kValid);
    if (!valid_data_)
      throw invalid_argument(
          "eval.interval is set but data.split gives the valid split no "
          "documents; raise the valid share of data.split or set "
          "eval.interval: 0",
          "data.split");
    const int64_t global = recipe_.batch.global_batch_size;
    valid_loader_ = std::make_unique<Loader>(*valid_data_, loader_options, valid_consumed_samples_,
                                             [global](int64_t) { return global; });
  }
}

// The recipe's device against this build and machine (cmd/device_select.h), unless the caller
// resolved it. Several GPU ranks: the groups are NCCL (train_main), each rank on its own GPU.
void Trainer::select_device() {
  device_ = options_.device != nullptr ? *options_.device
                                       : resolve_device(recipe_.device, options_.local_rank);
  if (device_.device == Device::kCUDA && options_.groups != nullptr &&
      std::string(options_.groups->world->transport()) != "nccl")
    throw invalid_argument("device: cuda with process groups over " +
                               std::string(options_.groups->world->transport()) +
                               ": GPU ranks communicate through NCCL groups (make_device_groups)",
                           "device");
}

// The memory preflight against the plan, the backend, and this stage's model with its weights.
void Trainer::build_model() {
  // This rank's stage (stages differ: in-flight micro-batches, embeddings, head), planned for
  // the launched world (the data-parallel size may not be in the recipe). Every node must hold
  // its ranks' plans before anything large is allocated.
  PlanOptions plan_options;
  plan_options.world_size = data_size_ * pipeline_size_ * recipe_.parallel.tensor;
  plan_options.device = device_.device;
  plan_options.threads = options_.threads;  // the CPU backend's (its bf16 weight copies)
  const Plan plan = make_plan(recipe_, plan_options);
  const StagePlan stage_plan = plan.stages.at(stage_);
  const MemoryTerms& planned = stage_plan.memory;
  predicted_peak_bytes_ = planned.total();
  // Outside the allocator: the context and NCCL's buffers (the BLAS workspace and the kernels'
  // scratch come from the allocator, so they are in what it reserves).
  predicted_outside_bytes_ = stage_plan.device.cuda_context + stage_plan.device.nccl_buffers;
  if (device_.device == Device::kCUDA) {
    // The context and the groups exist already (free memory is net of them); the backend's
    // BLAS workspace and kernel scratch are still to come.
    check_device_memory(device_, predicted_peak_bytes_ + stage_plan.device.blas_workspace +
                                     stage_plan.device.kernel_scratch);
  } else {
    check_host_memory(planned, options_.node,
                      options_.groups != nullptr ? options_.groups->world.get() : nullptr);
  }
  backend_ = make_backend(device_, options_.threads, recipe_.model.attention_backend);
  // Device groups order their operations after the backend's stream (an event), not the whole
  // device.
  if (options_.groups != nullptr) set_compute_stream(*options_.groups, backend_->native_stream());
  spdlog::info("device: {} ({})", device_.description, backend_->name());
  if (device_.device == Device::kCPU &&
      (recipe_.precision == Precision::kBF16 || recipe_.precision == Precision::kFP8))
    spdlog::info("bf16 GEMMs: {}", cpu::MatmulBf16::describe());
  if (recipe_.precision == Precision::kFP8)
    spdlog::info(
        "fp8: the linear layers' GEMMs on FP8 values ({}, {} scaling{}): each operand cast to "
        "the FP8 grid with its scale (held exactly in bf16), multiplied (on the CPU by the bf16 "
        "GEMM, emulated; on a GPU by cuBLASLt's FP8 GEMM where it applies) with fp32 sums and "
        "scaled back; the rest in bf16",
        recipe_.fp8.hybrid ? "E4M3 forward, E5M2 gradients" : "E4M3 throughout",
        recipe_.fp8.scaling == Fp8ScalingMode::kDelayed ? "delayed" : "current",
        recipe_.fp8.scaling == Fp8ScalingMode::kDelayed
            ? fmt::format(", amax history {}, {}", recipe_.fp8.amax_history_len,
                          recipe_.fp8.amax_algo == Fp8AmaxAlgo::kMax ? "max" : "most recent")
            : std::string());
  if (device_.device == Device::kCUDA)
    spdlog::info("attention kernels: {}; MTNLG_CUDA_ATTENTION and MTNLG_CUDA_FLASH2_DQ choose",
                 plan.cuda_attention_kernels);
  if (device_.device == Device::kCUDA) {
    // The precision's own peak: fp8's is FP8's (twice bf16's), as the field states FP8 runs,
    // even while its GEMMs are emulated in bf16 (the log says so above).
    const PeakPrecision pp = recipe_.precision == Precision::kFP32  ? PeakPrecision::kTf32
                             : recipe_.precision == Precision::kFP8 ? PeakPrecision::kFp8
                                                                    : PeakPrecision::kBf16;
    if (const auto spec = device_spec_from_name(backend_->name())) {
      peak_tflops_ = spec->peak(pp);
      spdlog::info("MFU: model TFLOP/s over the {}'s datasheet dense {} peak, {:g} TFLOP/s",
                   spec->name,
                   pp == PeakPrecision::kTf32  ? "TF32"
                   : pp == PeakPrecision::kFp8 ? "FP8"
                                               : "bf16/fp16",
                   peak_tflops_);
    } else {
      spdlog::info(
          "MFU: no datasheet peak known for {}; the metrics carry tflops_per_device "
          "and no mfu",
          backend_->name());
    }
  }
  GPTConfig config = gpt_config_from(recipe_);
  // Tensor parallelism: this rank's shard of every layer (model/gpt_stage.h).
  Communicator* tensor_group = options_.groups != nullptr ? options_.groups->tensor.get() : nullptr;
  if (config.tp_size > 1) {
    if (tensor_group == nullptr || tensor_group->size() != config.tp_size)
      throw invalid_argument("parallel.tensor: " + std::to_string(config.tp_size) +
                                 " needs that many ranks per model replica; launch the job with "
                                 "mpirun -np (tensor x pipeline x data) or set parallel.tensor: 1",
                             "parallel.tensor");
    config.tp_rank = tensor_group->rank();
  }
  // Pipeline stage: an even share of the layers (the recipe checks that they divide).
  const StageSpec spec = pipeline_stage(config, pipeline_size_, stage_);
  // ZeRO-1 reduce-scatters the gradient buffer in place: padded to a multiple of the data size.
  const bool zero = recipe_.parallel.zero_stage == 1 && data_size_ > 1;
  model_ = std::make_unique<GPTStage>(config, spec, *backend_, precision_dtype(recipe_.precision),
                                      recipe_.seed, tensor_group, zero ? data_size_ : 1);
  if (!start_checkpoint_.empty()) {
    // The weights come from the checkpoint (load_start_checkpoint), after the optimizer exists.
  } else if (recipe_.model.init_from.empty()) {
    model_->init_weights(recipe_.seed);
  } else {
    load_hf_gpt2(*model_, recipe_.model.init_from);
    spdlog::info("initialised from {}", recipe_.model.init_from);
  }
  spdlog::info(
      "model: {} parameters ({} layers, hidden {}, {} heads, ffn {}, vocab {} padded to {})",
      model_->params().global_numel(), config.num_layers, config.hidden, config.heads, config.ffn,
      config.vocab, config.padded_vocab);
}

// The optimizer (ZeRO-1 when GradSync reduce-scatters, else AdamW), the LR schedule, and the
// start checkpoint's state.
void Trainer::build_optimizer() {
  Communicator* tensor_group = options_.groups != nullptr ? options_.groups->tensor.get() : nullptr;
  // ZeRO-1 partitions the optimizer over the data group; with one data rank it is plain AdamW.
  optimizer_ = make_optimizer(model_->params(), *backend_, recipe_.optimizer, grad_sync_.get(),
                              options_.groups != nullptr ? options_.groups->data.get() : nullptr,
                              tensor_group);
  if (is_logging_rank_)
    spdlog::info("optimizer: {}, state {:.2f} MiB per rank", optimizer_->describe(),
                 static_cast<double>(optimizer_->state_bytes()) / 1048576.0);
  schedule_ = std::make_unique<LrSchedule>(recipe_.optimizer, recipe_.schedule);
  // fp16 scales the loss (Megatron); bf16's range needs no scaling.
  if (recipe_.precision == Precision::kFP16)
    scaler_ = std::make_unique<LossScaler>(recipe_.optimizer);
  load_start_checkpoint();
}

// The activations of the micro-batches in flight and the pipeline neighbours.
void Trainer::build_pipeline() {
  const int64_t micro = recipe_.parallel.micro_batch_size;
  const int64_t micro_batches = recipe_.batch.global_batch_size / (micro * data_size_);
  const int64_t chunks = model_->num_chunks();
  const std::vector<int64_t> sets =
      max_in_flight_per_chunk(pipeline_size_, stage_, chunks, micro_batches);
  for (int64_t c = 0; c < chunks; ++c) {
    auto& pool = acts_.emplace_back();
    for (int64_t k = 0; k < sets[static_cast<size_t>(c)]; ++k)
      pool.push_back(std::make_unique<StageActivations>(model_->make_activations(micro, c)));
  }
  p2p_ = std::make_unique<P2PCommunicator>(pipeline_size_ > 1 ? options_.groups->pipeline.get()
                                                              : nullptr);
  pipeline_buffers_ = make_pipeline_buffers(*backend_, *p2p_, model_->activation_shape(micro),
                                            model_->dtype(), chunks);
  if (recipe_.parallel.cuda_graph) {
    MTNLG_CHECK(chunks == 1 && acts_[0].size() == 1);  // one stage (check_supported)
    captured_ = std::make_unique<CapturedMicroBatch>(*model_, *backend_);
    spdlog::info(
        "parallel.cuda_graph: each micro-batch's forward and backward replayed from one "
        "recording ({}), recorded again when the gradient scale changes",
        backend_->device() == Device::kCUDA ? "a CUDA graph" : "on the CPU: the same calls");
    if (auto* adamw = dynamic_cast<AdamW*>(optimizer_.get())) {
      captured_step_ = std::make_unique<CapturedAdamWStep>(*adamw, model_->params(), *backend_);
      spdlog::info(
          "parallel.cuda_graph: the optimizer step (gradient norm, clip, AdamW) replayed too, "
          "its learning rate and loss scale uploaded before it, its loss and norm read after");
    }
  }
  if (recipe_.parallel.sequence_parallel && !model_->config().sequence_parallel)
    spdlog::warn("parallel.sequence_parallel: true has no effect with parallel.tensor 1");
  if (model_->config().sequence_parallel)
    spdlog::info("sequence parallel: {} of {} token rows per tensor rank between the GEMMs",
                 model_->config().local_rows(micro), micro * recipe_.model.seq_length);
  if (pipeline_size_ > 1 && chunks == 1)
    spdlog::info(
        "pipeline parallel (1F1B): stage {} of {}, layers [{}, {}), {} micro-batches in "
        "flight",
        stage_, pipeline_size_, model_->stage().first_layer, model_->stage().last_layer, sets[0]);
  if (chunks > 1) {
    std::string ranges;
    for (int64_t c = 0; c < chunks; ++c) {
      if (c > 0) ranges += ", ";
      ranges += '[' + std::to_string(model_->stage().chunk_first(c)) + ", " +
                std::to_string(model_->stage().chunk_last(c)) + ')';
    }
    spdlog::info(
        "pipeline parallel (interleaved 1F1B, {} chunks): stage {} of {}, layers {}, "
        "{} chunk micro-batches in flight",
        chunks, stage_, pipeline_size_, ranges,
        max_in_flight_interleaved(pipeline_size_, stage_, chunks, micro_batches));
  }
}

// The one path of every gradient reduction (parallel/grad_sync.h): over the data group (buckets
// all-reduced, or the ZeRO-1 reduce-scatter) and the tied word embeddings over their group.
void Trainer::build_grad_sync() {
  if (options_.groups == nullptr) return;  // one process: nothing to reduce
  std::vector<Tensor> grads;
  std::vector<int64_t> tied;
  for (const auto& p : model_->params().params()) {
    if (p.spec.tied != Tied::kNone) tied.push_back(static_cast<int64_t>(grads.size()));
    grads.push_back(p.grad);
  }
  // ZeRO-1 reduce-scatters (the optimizer updates its partition); otherwise buckets all-reduce,
  // overlapped on a communication thread that drives data_grads alone.
  const bool zero = recipe_.parallel.zero_stage == 1 && data_size_ > 1;
  const bool overlap = !zero && data_size_ > 1 && recipe_.parallel.overlap_grad_reduce;
  const GradSync::Mode mode = zero      ? GradSync::Mode::kReduceScatter
                              : overlap ? GradSync::Mode::kOverlap
                                        : GradSync::Mode::kAfterBackward;
  grad_sync_ = std::make_unique<GradSync>(
      std::move(grads), overlap ? *options_.groups->data_grads : *options_.groups->data, mode,
      std::max<int64_t>(1, std::llround(recipe_.parallel.grad_bucket_mb * 1048576.0)),
      model_->params().grad_buffer(),
      recipe_.parallel.grad_reduce_dtype == Precision::kBF16 ? DType::kBF16 : DType::kF32,
      backend_.get());
  grad_sync_->set_tied(pipeline_size_ > 1 ? options_.groups->embedding.get() : nullptr,
                       std::move(tied));
  if (data_size_ > 1)
    spdlog::info("data parallel: rank {} of {}, gradients {}", data_rank_, data_size_,
                 (zero ? std::string("reduce-scattered (ZeRO-1)")
                       : fmt::format("summed in {} buckets{}", grad_sync_->num_buckets(),
                                     overlap ? ", overlapped with backward" : "")) +
                     (recipe_.parallel.grad_reduce_dtype == Precision::kBF16 ? ", in bf16" : ""));
}

// The checkpoint saver, the metrics file and the resolved recipe beside it.
void Trainer::build_outputs() {
  if (!recipe_.checkpoint.dir.empty())
    saver_ = std::make_unique<CheckpointSaver>(
        recipe_.checkpoint.dir, recipe_.checkpoint.keep_last, recipe_.checkpoint.async,
        options_.groups != nullptr ? options_.groups->checkpoint.get() : nullptr);
  if (saver_ && checkpoint_tokenizer_)
    saver_->set_tokenizer(*checkpoint_tokenizer_, recipe_.model.max_position_embeddings);
  if (saver_ && recipe_.checkpoint.async) saver_->reserve(rank_shards());
  if (options_.write_files && is_logging_rank_) {
    // A resumed run continues its metrics file from the checkpoint's iteration.
    const bool resumed = start_full_ && iteration_ > 0;
    if (resumed) {
      const int64_t cut = truncate_metrics_file(recipe_.logging.metrics_file, iteration_);
      if (cut > 0)
        spdlog::info(
            "metrics: cut {} line(s) after iteration {} from {} (work lost since the "
            "checkpoint)",
            cut, iteration_, recipe_.logging.metrics_file);
    }
    std::error_code ec;
    const auto old_size = std::filesystem::file_size(recipe_.logging.metrics_file, ec);
    if (!resumed && !ec && old_size > 0)
      spdlog::warn(
          "metrics: {} holds {} bytes from an earlier run; this fresh run replaces them (set "
          "logging.metrics_file elsewhere to keep them, or checkpoint.resume: true to continue "
          "that run)",
          recipe_.logging.metrics_file, old_size);
    metrics_ = std::make_unique<MetricsWriter>(recipe_.logging.metrics_file, resumed);
    if (!recipe_.logging.tensorboard_dir.empty()) {
      tensorboard_ = std::make_unique<TensorBoardWriter>(recipe_.logging.tensorboard_dir);
      spdlog::info("TensorBoard: {}", tensorboard_->path());
    }
    // Beside the metrics file when that is a file in a run directory; a device or FIFO as the
    // metrics (logging.metrics_file: /dev/stdout) would put it in /dev: the working directory.
    namespace fs = std::filesystem;
    std::error_code type_ec;
    const fs::file_status metrics_status = fs::status(recipe_.logging.metrics_file, type_ec);
    const auto dir = fs::exists(metrics_status) && !fs::is_regular_file(metrics_status)
                         ? fs::current_path()
                         : fs::path(recipe_.logging.metrics_file).parent_path();
    const auto saved = (dir / "resolved_recipe.yaml").string();
    std::ofstream out(saved, std::ios::trunc);
    out << recipe_to_yaml(recipe_);
    if (!out) throw io_error("cannot write the resolved recipe", saved);
    spdlog::info("metrics: {} (resolved recipe saved to {})", recipe_.logging.metrics_file, saved);
  }
}

Trainer::~Trainer() = default;

IterationStats Trainer::train_step() {
  IterationStats s = step();
  log_iteration(s);
  return s;
}

// One iteration, as llm.c's loop reads: the batch's size, zeroed gradients, the pipeline
// schedule's forwards and backwards over the micro-batches, the gradients' reductions, the loss
// and the gradient norm, the divergence check, then the update (skipped on an fp16 overflow) at
// the schedule's rate, the loss scale, and the iteration's figures.
IterationStats Trainer::step() {
  const StepStart start = step_start();
  const int64_t global = batch_at_(consumed_samples_);
  const int64_t batch_tokens = global * recipe_.model.seq_length;

  model_->params().zero_grads(*backend_);
  if (options_.hooks.before_backward)
    options_.hooks.before_backward({iteration_ + 1,
                                    options_.groups != nullptr ? options_.groups->world->rank() : 0,
                                    model_->params(), *backend_});
  const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
  const bool on_device = captured_step_ != nullptr;
  const double loss_sum =
      forward_backward(global, loss_scale / static_cast<double>(batch_tokens), !on_device);
  if (grad_sync_) grad_sync_->wait(*backend_);  // over data ranks, and the tied copies

  // The learning rate of an update: a skipped one does not use it.
  const int64_t seq = recipe_.model.seq_length;
  const double update_lr = schedule_->lr_at((consumed_samples_ + global) * seq - skipped_tokens_);
  double loss = 0.0, scaled_norm = 0.0;
  bool updated_on_device = false;
  if (on_device) {
    // Queued behind the micro-batches; skipped there when the norm or the loss is not finite.
    if (captured_step_->queue(update_lr, loss_scale, step_loss_->device_total()) &&
        captured_step_->launches() >= 0)
      spdlog::info("parallel.cuda_graph: optimizer step recorded: {} launches replayed as one",
                   captured_step_->launches());
    const CapturedAdamWStep::Result r = captured_step_->finish();
    loss =
        sum_over_data(step_loss_->take_read(*backend_, r.loss)) / static_cast<double>(batch_tokens);
    scaled_norm = std::sqrt(r.sum_squares);  // global_grad_norm's, from the same sums
    updated_on_device = r.updated;
  } else {
    loss = sum_over_data(sum_over_pipeline(loss_sum)) / static_cast<double>(batch_tokens);
    // The norm of the scaled gradients is reduced over every group, so an inf or NaN on any
    // rank makes it non-finite on all of them: the ranks agree on an fp16 overflow without
    // another collective.
    scaled_norm = this->grad_norm();
  }
  const bool overflow = scaler_ != nullptr && !std::isfinite(scaled_norm);
  const double grad_norm = scaled_norm / loss_scale;
  ++iteration_;
  check_step_finite({loss, grad_norm, overflow, iteration_}, weights_source(),
                    recipe_.model.init_method_std);

  // The LR schedule advances by the tokens of updating iterations only (Megatron's scheduler
  // steps on successful updates), so a skipped iteration leaves it where it was.
  if (overflow) {
    ++skipped_iterations_;
    skipped_tokens_ += batch_tokens;
  }
  const double lr = schedule_->lr_at((consumed_samples_ + global) * seq - skipped_tokens_);
  if (on_device) {
    // The device skipped exactly what the host would have: an overflow (the divergence check
    // above stopped every other non-finite step).
    MTNLG_CHECK_MSG(updated_on_device == !overflow,
                    "parallel.cuda_graph: the device's optimizer step "
                        << (updated_on_device ? "ran" : "was skipped") << " at iteration "
                        << iteration_ << " where the host's would" << (overflow ? " not" : "")
                        << " have");
  } else if (!overflow) {  // unscales the gradients with the clip
    optimizer_->step(lr, clip_coefficient(grad_norm, recipe_.optimizer.clip_grad) / loss_scale);
  }
  if (scaler_) scaler_->update(overflow);
  // FP8's delayed scales: the step's amaxes, the largest over the data-parallel replicas and
  // the tensor-parallel shards, give the next step's scales (model/fp8_linear.h).
  if (Fp8Linears* fp8 = model_->fp8()) {
    if (options_.groups != nullptr)
      fp8->end_step({options_.groups->data.get(), options_.groups->tensor.get()});
    else
      fp8->end_step({});
  }
  backend_->synchronize();
  consumed_samples_ += global;
  return step_stats(start, {loss, grad_norm, overflow, iteration_}, lr, loss_scale, global);
}

Trainer::StepStart Trainer::step_start() const {
  return {std::chrono::steady_clock::now(), bytes_sent(), p2p_->seconds_in_calls()};
}

WeightsSource Trainer::weights_source() const {
  if (!start_checkpoint_.empty()) return WeightsSource::kCheckpoint;
  return recipe_.model.init_from.empty() ? WeightsSource::kInit : WeightsSource::kInitFrom;
}

double Trainer::forward_backward(int64_t global, double grad_scale, bool read_loss) {
  const int64_t micro = recipe_.parallel.micro_batch_size;
  // The last stage's loss, summed on the device and read once the schedule is done.
  if (!step_loss_) step_loss_.emplace(*backend_);
  const int64_t steps = global / (micro * data_size_);
  // Every stage reads the same micro-batches, in order, at the first chunk's forward: the first
  // stage uses the tokens, the last the targets (in its last chunk).
  const int64_t chunks = model_->num_chunks();
  pending_batches_.resize(static_cast<size_t>(steps));
  const ChunkForwardStep forward_step = [&](int64_t c, int64_t m, const Tensor& input) {
    if (c == 0) {
      MicroBatch mb = train_loader_->next();
      MTNLG_CHECK_EQ(mb.first_sample, consumed_samples_ + (m * data_size_ + data_rank_) * micro);
      MTNLG_CHECK_EQ(mb.last_of_iteration, m == steps - 1);
      pending_batches_[static_cast<size_t>(m)] = std::move(mb);
    }
    const MicroBatch& mb = pending_batches_[static_cast<size_t>(m)];
    const auto micro_batch_id = static_cast<uint64_t>(mb.first_sample / micro);
    auto& pool = acts_[static_cast<size_t>(c)];
    StageActivations& acts = *pool[static_cast<size_t>(m) % pool.size()];
    model_->forward(acts, model_->stage().pre_process && c == 0 ? mb.tokens : input, mb.targets,
                    micro_batch_id, *step_loss_);
    return acts.residual.back();
  };
  // On a chunk's last micro-batch each of its gradients is final as backward passes it: start
  // its bucket.
  const bool overlap = grad_sync_ && grad_sync_->mode() == GradSync::Mode::kOverlap;
  const GradReadyHook grad_ready = [&](const Param& p) {
    grad_sync_->mark_ready(*backend_, p.grad);
  };
  const ChunkBackwardStep backward_step = [&](int64_t c, int64_t m, const Tensor& output_grad) {
    auto& pool = acts_[static_cast<size_t>(c)];
    return model_->backward(*pool[static_cast<size_t>(m) % pool.size()], output_grad, grad_scale,
                            overlap && m == steps - 1 ? grad_ready : GradReadyHook());
  };
  // The weights stay as they are until the optimizer steps: GEMM kernels may keep them in their
  // own layout across this iteration's micro-batches (Backend::begin_frozen_weights).
  FrozenWeights frozen(*backend_);
  if (captured_) {
    // One stage, no tensor shards (parallel.cuda_graph): this rank's micro-batches in order,
    // each replayed; the gradients reduced after backward (GradSync::wait).
    for (int64_t m = 0; m < steps; ++m) {
      MicroBatch mb = train_loader_->next();
      MTNLG_CHECK_EQ(mb.first_sample, consumed_samples_ + (m * data_size_ + data_rank_) * micro);
      MTNLG_CHECK_EQ(mb.last_of_iteration, m == steps - 1);
      const bool recorded =
          captured_->run(*acts_[0][0], mb.tokens, mb.targets,
                         static_cast<uint64_t>(mb.first_sample / micro), grad_scale, *step_loss_);
      if (recorded && captured_->launches() >= 0)
        spdlog::info(
            "parallel.cuda_graph: micro-batch recorded (recording {}, gradient scale {:g}): {} "
            "launches replayed as one",
            captured_->recordings(), grad_scale, captured_->launches());
    }
  } else if (chunks > 1) {
    forward_backward_pipelining_with_interleaving(*p2p_, chunks, steps, pipeline_buffers_,
                                                  forward_step, backward_step);
  } else {
    forward_backward_pipelining_without_interleaving(
        *p2p_, steps, pipeline_buffers_,
        [&](int64_t m, const Tensor& input) { return forward_step(0, m, input); },
        [&](int64_t m, const Tensor& grad) { return backward_step(0, m, grad); });
  }
  return read_loss ? step_loss_->take(*backend_) : 0.0;
}

IterationStats Trainer::step_stats(const StepStart& start, const StepHealth& health, double lr,
                                   double loss_scale, int64_t global) {
  const int64_t seq = recipe_.model.seq_length;
  const CommBytes sent = combine(bytes_sent(), start.bytes, -1);
  comm_sent_ = combine(comm_sent_, sent, 1);
  ++comm_iterations_;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start.time).count();
  train_seconds_ += seconds;
  pipeline_seconds_ += p2p_->seconds_in_calls() - start.p2p_seconds;
  IterationStats s;
  s.iteration = health.iteration;
  s.loss = health.loss;
  s.lr = lr;
  s.global_batch_size = global;
  s.consumed_samples = consumed_samples_;
  s.consumed_tokens = consumed_samples_ * seq;
  s.grad_norm = health.overflow ? std::numeric_limits<double>::quiet_NaN() : health.grad_norm;
  s.loss_scale = loss_scale;
  s.skipped = health.overflow;
  s.skipped_iterations = skipped_iterations_;
  s.elapsed_ms = seconds * 1e3;
  s.tokens_per_sec = static_cast<double>(global * seq) / seconds;
  // Model FLOPs this iteration executed (model/gpt_flops.h; with activation checkpointing the
  // recomputed forward counts, as the paper's 96 B s l h^2 form), per device of the run.
  s.tflops_per_device =
      model_flops_per_iteration(recipe_, global, recipe_.parallel.activation_checkpointing) /
      seconds / 1e12 / static_cast<double>(data_size_ * pipeline_size_ * recipe_.parallel.tensor);
  if (peak_tflops_ > 0.0) s.mfu = s.tflops_per_device / peak_tflops_;
  s.peak_memory_bytes = backend_->peak_bytes();
  s.comm_bytes = sent.total();
  if (health.iteration == 1) log_memory("after the first iteration");
  return s;
}

EvalStats Trainer::evaluate() {
  EvalStats e = compute_evaluation();
  log_evaluation(e);
  evaluations_.push_back(e);
  return e;
}

EvalStats Trainer::compute_evaluation() {
  MTNLG_CHECK(valid_loader_ != nullptr);
  // Its plain calls may move what a recording holds by address (the stage's scratch, a
  // workspace): every recording records again after it.
  backend_->invalidate_recordings();
  const int64_t micro = recipe_.parallel.micro_batch_size, seq = recipe_.model.seq_length;
  const int64_t steps =
      recipe_.eval.iters * (recipe_.batch.global_batch_size / (micro * data_size_));
  if (!step_loss_) step_loss_.emplace(*backend_);  // zero between steps; read once, at the end
  LossSum& loss_sum = *step_loss_;
  model_->set_training(false);  // no dropout, as Megatron-LM's model.eval()
  // Forward only: one micro-batch in flight, its output sent on before the next forward.
  MicroBatch mb;
  const ChunkForwardStep forward_step = [&](int64_t c, int64_t, const Tensor& input) {
    if (c == 0) mb = valid_loader_->next();
    StageActivations& acts = *acts_[static_cast<size_t>(c)].front();
    model_->forward(acts, model_->stage().pre_process && c == 0 ? mb.tokens : input, mb.targets,
                    static_cast<uint64_t>(mb.first_sample / micro), loss_sum);
    return acts.residual.back();
  };
  {
    FrozenWeights frozen(*backend_);
    forward_pipelining(*p2p_, model_->num_chunks(), steps, pipeline_buffers_, forward_step);
  }
  model_->set_training(true);
  EvalStats e;
  e.iteration = iteration_;
  e.samples = steps * micro * data_size_;
  e.loss = sum_over_data(sum_over_pipeline(loss_sum.take(*backend_))) /
           static_cast<double>(e.samples * seq);
  e.ppl = std::exp(e.loss);
  return e;
}

void Trainer::build_tasks() {
  const EvalConfig& e = recipe_.eval;
  if (e.tasks_interval == 0) return;
  check_task_names(e.tasks, "eval.tasks");
  // One process on the CPU in fp32 or bf16: the packed rows (model/gpt_scorer.h) on the fp32
  // weights (a bf16 run's widened into a copy, compute_tasks), as mtnlg-eval scores the
  // checkpoint. Any other layout, device or precision: the run's own model through the training
  // forward (cmd/stage_scorer.h), every rank taking part. (Data ranks of a one-stage CPU run each
  // score every request on rows: the same numbers, bit for bit, as mtnlg-eval.)
  if (!std::filesystem::is_directory(e.task_dir))
    throw not_found("eval.task_dir: " + e.task_dir +
                        " is not a directory; export the tasks there as TASK/SPLIT.jsonl "
                        "(docs/evaluation.md)",
                    e.task_dir);
  // eval.vocab_file/merge_file, else the run's tokenizer.*, else data/gpt2/.
  const TokenizerConfig& t = recipe_.tokenizer;
  task_tokenizer_ =
      Gpt2Tokenizer::load(vocabulary_path(e.vocab_file.empty() ? t.vocab_file : e.vocab_file,
                                          "eval.vocab_file", "data/gpt2/encoder.json"),
                          vocabulary_path(e.merge_file.empty() ? t.merge_file : e.merge_file,
                                          "eval.merge_file", "data/gpt2/vocab.bpe"));
}

bool Trainer::tasks_on_rows() const {
  return recipe_.parallel.tensor == 1 && pipeline_size_ == 1 && device_.device == Device::kCPU &&
         recipe_.precision != Precision::kFP16;
}

std::vector<TaskMetrics> Trainer::compute_tasks() {
  // Its plain calls may move what a recording holds by address (the stage's scratch, a
  // workspace): every recording records again after it.
  backend_->invalidate_recordings();
  const EvalConfig& e = recipe_.eval;
  TaskOptions o;
  o.task_dir = e.task_dir;
  o.num_fewshot = e.num_fewshot;
  o.limit = e.tasks_limit;
  std::vector<TaskMetrics> out;
  if (!tasks_on_rows()) {
    // The run's model in its layout and precision, its replicas sharing the requests. Micro-batches
    // hold at most a training micro-batch's tokens (or one window): no more activation memory.
    if (!task_scorer_) {
      ScorerGroups sg;
      if (options_.groups != nullptr) {
        sg.tensor = recipe_.parallel.tensor > 1 ? options_.groups->tensor.get() : nullptr;
        sg.pipeline = pipeline_size_ > 1 ? options_.groups->pipeline.get() : nullptr;
        sg.data = data_size_ > 1 ? options_.groups->data.get() : nullptr;
      }
      model_->set_training(false);
      task_scorer_ = std::make_unique<StageScorer>(
          *model_, sg, recipe_.parallel.micro_batch_size * recipe_.model.seq_length);
    }
    model_->set_training(false);
    for (const std::string& t : e.tasks)
      out.push_back(run_task(t, *task_scorer_, *task_tokenizer_, o));
    model_->set_sequence_length(recipe_.model.seq_length);
    model_->set_training(true);
    return out;
  }
  GPTStage* scored = model_.get();
  if (recipe_.precision != Precision::kFP32) {
    // bf16 weights widened (exactly) into an fp32 copy of the model: the weights mtnlg-eval
    // loads from this iteration's checkpoint, so the lines equal its scores.
    if (!task_model_) {
      const GPTConfig& c = model_->config();
      task_model_ =
          std::make_unique<GPTStage>(c, full_model(c), *backend_, DType::kF32, recipe_.seed);
      task_model_->set_training(false);
    }
    auto& to = task_model_->params().params();
    const auto& from = model_->params().params();
    MTNLG_CHECK_EQ(to.size(), from.size());
    for (size_t i = 0; i < to.size(); ++i) backend_->copy(to[i].value, from[i].value);
    scored = task_model_.get();
  }
  if (!task_scorer_)  // its scratch only once a scoring is due
    task_scorer_ = std::make_unique<GPTScorer>(
        *scored, TaskOptions{}.batch_size * scored->config().max_positions);
  for (const std::string& t : e.tasks)
    out.push_back(run_task(t, *task_scorer_, *task_tokenizer_, o));
  return out;
}

void Trainer::log_tasks(const std::vector<TaskMetrics>& tasks) {
  std::string summary;
  for (const TaskMetrics& m : tasks) {
    if (metrics_) {
      JsonLine line;
      line.add("iteration", iteration_).add("split", "tasks");
      add_task_metrics(line, m);
      line.add("consumed_samples", consumed_samples_)
          .add("consumed_tokens", consumed_samples_ * recipe_.model.seq_length);
      metrics_->write(line);
    }
    if (tensorboard_) {
      if (m.has_rolling)
        tensorboard_->scalar(m.task + " word_perplexity", m.word_perplexity, iteration_);
      if (!m.has_rolling) tensorboard_->scalar(m.task + " acc", m.acc, iteration_);
      if (m.has_acc_norm) tensorboard_->scalar(m.task + " acc_norm", m.acc_norm, iteration_);
      if (m.has_perplexity) tensorboard_->scalar(m.task + " ppl", m.perplexity, iteration_);
      tensorboard_->flush();
    }
    summary += " | " + m.task + " ";
    summary += m.has_rolling ? fmt::format("word_perplexity {:.3f}", m.word_perplexity)
                             : fmt::format("acc {:.4f}", m.acc);
    if (m.has_acc_norm) summary += fmt::format(" acc_norm {:.4f}", m.acc_norm);
    if (m.has_perplexity) summary += fmt::format(" ppl {:.3f}", m.perplexity);
    summary += fmt::format(" ({} documents, {:.1f} s)", m.documents, m.seconds);
  }
  if (is_logging_rank_)
    spdlog::info("tasks after iteration {} ({}-shot){}", iteration_, recipe_.eval.num_fewshot,
                 summary);
}

void Trainer::log_evaluation(const EvalStats& e) {
  const int64_t seq = recipe_.model.seq_length;
  if (metrics_) {
    JsonLine line;
    line.add("iteration", e.iteration)
        .add("split", "valid")
        .add("loss", e.loss)
        .add("ppl", e.ppl)
        .add("consumed_samples", consumed_samples_)
        .add("consumed_tokens", consumed_samples_ * seq)
        .add("eval_samples", e.samples);
    metrics_->write(line);
  }
  if (tensorboard_) {
    // Megatron-LM's names: '{key} validation', its ppl, each also against consumed samples.
    tensorboard_->scalar("lm loss validation", e.loss, e.iteration);
    tensorboard_->scalar("lm loss validation vs samples", e.loss, consumed_samples_);
    tensorboard_->scalar("lm loss validation ppl", e.ppl, e.iteration);
    tensorboard_->scalar("lm loss validation ppl vs samples", e.ppl, consumed_samples_);
    tensorboard_->flush();
  }
  if (is_logging_rank_)
    spdlog::info("validation after iteration {} | loss {:.4f} | ppl {:.3f} | {} samples",
                 e.iteration, e.loss, e.ppl, e.samples);
}

void Trainer::log_iteration(const IterationStats& s) {
  if (metrics_) {
    JsonLine line;
    line.add("iteration", s.iteration)
        .add("split", "train")
        .add("loss", s.loss)
        .add("lr", s.lr)
        .add("global_batch_size", s.global_batch_size)
        .add("consumed_samples", s.consumed_samples)
        .add("consumed_tokens", s.consumed_tokens)
        .add("grad_norm", s.grad_norm)
        .add("tokens_per_sec", s.tokens_per_sec)
        .add("elapsed_ms", s.elapsed_ms)
        .add("tflops_per_device", s.tflops_per_device);
    if (s.mfu >= 0) line.add("mfu", s.mfu);
    line.add("peak_memory_bytes", s.peak_memory_bytes)
        .add("comm_bytes", s.comm_bytes)
        .add("loss_scale", s.loss_scale)
        .add("skipped_iterations", s.skipped_iterations);
    if (s.checkpoint_stall_ms >= 0) line.add("checkpoint_stall_ms", s.checkpoint_stall_ms);
    metrics_->write(line);
  }
  if (tensorboard_) {
    // Megatron-LM's names (training_log), each also against consumed samples where it has one.
    const auto both = [&](const char* tag, double v) {
      tensorboard_->scalar(tag, v, s.iteration);
      tensorboard_->scalar(std::string(tag) + " vs samples", v, s.consumed_samples);
    };
    both("learning-rate", s.lr);
    both("batch-size", static_cast<double>(s.global_batch_size));
    both("lm loss", s.loss);
    both("loss-scale", s.loss_scale);
    both("grad-norm", s.grad_norm);
    tensorboard_->scalar("iteration-time", s.elapsed_ms / 1000.0, s.iteration);
    tensorboard_->scalar("throughput", s.tflops_per_device, s.iteration);  // TFLOP/s a device
    tensorboard_->scalar("tokens-per-sec", s.tokens_per_sec, s.iteration);
    if (s.mfu >= 0) tensorboard_->scalar("mfu", s.mfu, s.iteration);
    if (s.iteration % recipe_.logging.interval == 0 || s.iteration == total_iters_)
      tensorboard_->flush();
  }
  if (is_logging_rank_ && (s.iteration % recipe_.logging.interval == 0 ||
                           s.iteration == total_iters_ || s.iteration == 1)) {
    // Time per iteration of this process (a resumed run started at start_iteration_).
    const double left = train_seconds_ /
                        static_cast<double>(std::max<int64_t>(1, s.iteration - start_iteration_)) *
                        static_cast<double>(total_iters_ - s.iteration);
    const std::string scaling =
        scaler_ ? fmt::format(" | loss scale {} | skipped {}{}", json_number(s.loss_scale),
                              s.skipped_iterations, s.skipped ? " (this one: overflow)" : "")
                : "";
    const std::string mfu = s.mfu >= 0 ? fmt::format(" | MFU {:.1f}%", 100.0 * s.mfu) : "";
    spdlog::info(
        "iteration {:>6}/{} | loss {:.4f} | lr {:.3e} | batch {} | grad norm {:.3f} | "
        "{:.0f} tokens/s{} | {:.0f} ms | left {}{}",
        s.iteration, total_iters_, s.loss, s.lr, s.global_batch_size, s.grad_norm, s.tokens_per_sec,
        mfu, s.elapsed_ms, format_duration(left), scaling);
  }
}

double Trainer::sum_over_data(double local) const {
  if (data_size_ == 1) return local;
  Tensor t = Tensor::cpu({1}, DType::kF64);
  t.data_as<double>()[0] = local;
  options_.groups->data->all_reduce(t, ReduceOp::kSum);
  return t.data_as<double>()[0];
}

double Trainer::sum_over_pipeline(double local) const {
  if (pipeline_size_ == 1) return local;
  Tensor t = Tensor::cpu({1}, DType::kF64);
  t.data_as<double>()[0] = local;
  options_.groups->pipeline->all_reduce(t, ReduceOp::kSum);
  return t.data_as<double>()[0];
}

double Trainer::grad_norm() {
  // Within a stage: tensor-parallel shards summed over the tensor group, replicated parameters
  // counted once (data-reduced first under ZeRO-1). Over stages: the sum of squares; the tied
  // embedding (equal on the first and last stage after the embedding all-reduce) counts once,
  // on the first stage.
  const double norm = optimizer_->grad_norm();
  if (pipeline_size_ == 1) return norm;
  return std::sqrt(sum_over_pipeline(norm * norm));
}

CommBytes Trainer::bytes_sent() const {
  CommBytes c;
  const ProcessGroups* g = options_.groups;
  if (g == nullptr) return c;
  const auto of = [](const std::unique_ptr<Communicator>& group) {
    return group ? group->bytes_sent() : int64_t{0};
  };
  // data_grads spans the data group's ranks (GradSync's own connections): counted as data.
  c.tensor = of(g->tensor);
  c.pipeline = of(g->pipeline);
  c.data = of(g->data) + of(g->data_grads);
  c.embedding = of(g->embedding);
  c.world = of(g->world);
  return c;
}

void Trainer::log_memory(const char* when) const {
  const auto measured = static_cast<double>(backend_->peak_bytes());
  const auto predicted = static_cast<double>(predicted_peak_bytes_);
  spdlog::info("memory {}: peak {:.1f} MiB measured, {:.1f} MiB planned ({:+.1f}%; {} B, {} B)",
               when, measured / 1048576.0, predicted / 1048576.0,
               measured > 0 ? 100.0 * (predicted - measured) / measured : 0.0,
               backend_->peak_bytes(), predicted_peak_bytes_);
  if (backend_->peak_reserved_bytes() > 0)
    spdlog::info(
        "memory {}: {:.1f} MiB reserved from the device at most (the peak above plus the "
        "caching allocator's rounding and cached blocks, the BLAS workspace and the kernels' "
        "scratch)",
        when, static_cast<double>(backend_->peak_reserved_bytes()) / 1048576.0);
  if (const int64_t in_use = backend_->device_bytes_in_use(); in_use > 0) {
    const int64_t outside = in_use - backend_->reserved_bytes();
    spdlog::info(
        "memory {}: {:.1f} MiB in use on {}, {:.1f} MiB of it outside the allocator (the CUDA "
        "context, NCCL's buffers, and any other process on that GPU); the plan estimated "
        "{:.1f} MiB for the context and NCCL ({} B outside)",
        when, static_cast<double>(in_use) / 1048576.0, backend_->name(),
        static_cast<double>(outside) / 1048576.0,
        static_cast<double>(predicted_outside_bytes_) / 1048576.0, outside);
  }
}

std::vector<IterationStats> Trainer::run() {
  std::vector<IterationStats> all;
  spdlog::info("training {} iterations of up to {} samples x {} tokens{}", total_iters_,
               recipe_.batch.global_batch_size, recipe_.model.seq_length,
               recipe_.batch.rampup.start > 0
                   ? " (batch ramp from " + std::to_string(recipe_.batch.rampup.start) + ")"
                   : std::string());
  start_iteration_ = iteration_;
  if (iteration_ > 0 && iteration_ < total_iters_)
    spdlog::info("continuing at iteration {} of {} ({} samples consumed)", iteration_ + 1,
                 total_iters_, consumed_samples_);
  const int64_t interval = recipe_.eval.interval;
  const int64_t save_interval = recipe_.checkpoint.save_interval;
  while (iteration_ < total_iters_) {
    IterationStats s = step();
    const bool stop = agree_to_stop();
    const bool eval_due =
        interval > 0 && (iteration_ % interval == 0 || iteration_ == total_iters_);
    std::optional<EvalStats> eval;
    if (eval_due) eval = compute_evaluation();
    const int64_t tasks_interval = recipe_.eval.tasks_interval;
    std::vector<TaskMetrics> tasks;
    if (tasks_interval > 0 && iteration_ % tasks_interval == 0) tasks = compute_tasks();
    // The iteration's metrics lines are written before its checkpoint is committed: a kill after
    // the commit never loses them, one before it loses the checkpoint and the resume cuts them.
    const auto write_lines = [&] {
      log_iteration(s);
      if (eval) log_evaluation(*eval);
      if (!tasks.empty()) log_tasks(tasks);
    };
    if (saver_ && (stop || iteration_ == total_iters_ ||
                   (save_interval > 0 && iteration_ % save_interval == 0))) {
      save_checkpoint([&](double stall_ms) {
        s.checkpoint_stall_ms = stall_ms;
        write_lines();
      });
    } else {
      if (saver_) saver_->check();  // a failed background save stops training here
      write_lines();
    }
    all.push_back(s);
    if (eval) evaluations_.push_back(*eval);
    if (stop) break;
  }
  if (saver_) saver_->wait();  // the last save is committed before the run ends
  if (iteration_ == total_iters_) stop_reason_ = StopReason::kFinished;  // stopped at the end
  if (stop_reason_ != StopReason::kFinished) {
    saved_at_stop_ = saver_ != nullptr;
    const std::string why = stop_reason_ == StopReason::kSignal
                                ? std::string("received ") + stop_signal_name(stop_signal_)
                                : fmt::format("schedule.exit_duration_minutes: {} reached",
                                              recipe_.schedule.exit_duration_minutes);
    if (saved_at_stop_) {
      spdlog::warn(
          "stopped after iteration {} ({}): checkpoint saved in {}; exiting {} to be "
          "resumed (checkpoint.resume: true)",
          iteration_, why, recipe_.checkpoint.dir, kExitTryAgain);
    } else {
      spdlog::warn("stopped after iteration {} ({}): nothing was saved (checkpoint.dir is not set)",
                   iteration_, why);
    }
    return all;
  }
  spdlog::info("done: {} iterations, {} tokens, {:.1f} s, final loss {:.4f}", iteration_,
               consumed_samples_ * recipe_.model.seq_length, train_seconds_,
               all.empty() ? 0.0 : all.back().loss);
  log_memory("at the end");
  // Every rank: its mean bytes sent per training iteration, per group (bench/comm_bench.sh
  // parses this line; planner.h communication_per_iteration predicts it).
  const Topology* t = options_.topology;
  const auto mean = [&](int64_t bytes) {
    return comm_iterations_ > 0 ? static_cast<double>(bytes) / static_cast<double>(comm_iterations_)
                                : 0.0;
  };
  spdlog::info(
      "communication: rank {} (tp {} pp {} dp {}) bytes/iteration tensor={} pipeline={} data={} "
      "embedding={} world={} total={} over {} iterations",
      options_.groups != nullptr ? options_.groups->world->rank() : 0,
      t != nullptr ? t->tensor_rank() : 0, t != nullptr ? t->pipeline_rank() : 0,
      t != nullptr ? t->data_rank() : 0, mean(comm_sent_.tensor), mean(comm_sent_.pipeline),
      mean(comm_sent_.data), mean(comm_sent_.embedding), mean(comm_sent_.world),
      mean(comm_sent_.total()), comm_iterations_);
  if (pipeline_size_ > 1 && train_seconds_ > 0) {
    // The stage's share of training time spent in its pipeline send/recv calls, beside the
    // bubble the schedule predicts (bench/comm_bench.sh parses this line).
    const int64_t chunks = model_->num_chunks();
    const int64_t m =
        recipe_.batch.global_batch_size / (recipe_.parallel.micro_batch_size * data_size_);
    spdlog::info(
        "pipeline wait: stage {} of {} ({} chunks) {:.1f} ms of {:.1f} ms in send/recv "
        "= {:.4f}; planned bubble {:.4f} over {} iterations",
        stage_, pipeline_size_, chunks, pipeline_seconds_ * 1e3, train_seconds_ * 1e3,
        pipeline_seconds_ / train_seconds_, pipeline_bubble_fraction(pipeline_size_, chunks, m),
        iteration_ - start_iteration_);
  }
  return all;
}

}  // namespace mtnlg
