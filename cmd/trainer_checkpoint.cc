// The Trainer's side of checkpointing: which checkpoint a run starts from, what each rank saves,
// and when the ranks agree to stop. The files, the commit and resharding are checkpoint/'s.
#include <filesystem>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline.h"
#include "checkpoint/saver.h"
#include "checkpoint/shard_io.h"
#include "cmd/trainer.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "model/fp8_linear.h"
#include "model/gpt_config.h"
#include "model/gpt_stage.h"
#include "optim/adamw.h"
#include "optim/batch_ramp.h"
#include "optim/lr_schedule.h"
#include "parallel/communicator.h"
#include "parallel/topology.h"

namespace mtnlg {

namespace {

// A checkpoint of another model shape is an error naming the key (and, for a resume, a changed
// seq_length too: the data position is counted in its samples). A settings error, not damage:
// exit 2.
void check_same_model(const CheckpointManifest& m, const Recipe& r, const std::string& dir,
                      bool full) {
  const ManifestModel want = manifest_model(r);
  const auto check = [&](const char* key, int64_t saved, int64_t now, const std::string& why) {
    if (saved == now) return;
    throw invalid_argument(
        std::string(key) + " is " + std::to_string(now) + why + " but the checkpoint " + dir +
            " was saved with " + std::to_string(saved) + "; set " + key + ": " +
            std::to_string(saved) + " (a checkpoint loads only into its own model shape)",
        key);
  };
  check("model.num_layers", m.model.num_layers, want.num_layers, "");
  check("model.hidden_size", m.model.hidden_size, want.hidden_size, "");
  check("model.num_attention_heads", m.model.num_attention_heads, want.num_attention_heads, "");
  check("model.ffn_hidden_size", m.model.ffn_hidden_size, want.ffn_hidden_size, "");
  // A changed seq_length first: max_position_embeddings follows it unless set.
  if (full) check("model.seq_length", m.model.seq_length, want.seq_length, "");
  check(
      "model.max_position_embeddings", m.model.max_position_embeddings,
      want.max_position_embeddings,
      want.max_position_embeddings == want.seq_length ? " (it defaults to model.seq_length)" : "");
  check("model.vocab_size", m.model.vocab_size, want.vocab_size, "");
}

// precision: fp8's scaling state from a checkpoint that has it (Fp8Linears::state_tensors); one
// saved without it (in another precision) leaves the scales to start afresh, as Transformer
// Engine's would from weights alone.
void load_fp8_state(ShardIndex& index, Fp8Linears& fp8) {
  const std::string prefix = Fp8Linears::kStatePrefix;
  bool any = false;
  for (const std::string& name : index.names("model_")) any = any || name.starts_with(prefix);
  if (!any) {
    spdlog::info(
        "fp8: the checkpoint has no FP8 scaling state (saved in another precision); "
        "the scales start afresh");
    return;
  }
  std::vector<std::pair<std::string, std::string>> states;
  for (const auto& [name, unused] : fp8.save()) {
    StateTensor t;
    t.name = prefix + name;
    const Shape shape = index.global_shape(t.name);  // not_found naming it when missing
    t.global_shape = shape;
    t.start = {0};
    t.shape = shape;
    t.flat_end = shape.empty() ? 0 : shape[0];
    Tensor words = Tensor::cpu(shape, DType::kF32);
    index.read(t, words);
    states.emplace_back(name, Fp8Linears::bytes_of(words));
  }
  fp8.load(states);
  spdlog::info("fp8: the scaling state of {} tensors loaded (scales and amax histories)",
               states.size());
}

}  // namespace

void Trainer::find_start_checkpoint() {
  const CheckpointConfig& c = recipe_.checkpoint;
  if (!c.dir.empty()) {
    if (is_logging_rank_) {
      const RootState state = prepare_root(c.dir);
      for (const std::string& stale : state.removed)
        spdlog::warn("checkpoint: removed {} (left by an interrupted save)", stale);
      if (state.rolled_forward)
        spdlog::warn("checkpoint: {} now names iteration {}: {}", kLatestFile,
                     *state.rolled_forward, state.rolled_because);
      if (!state.newer_than_latest.empty() && c.resume && c.load_iteration < 0) {
        std::string newer;
        for (const int64_t it : state.newer_than_latest)
          newer += (newer.empty() ? "" : ", ") + iteration_dir_name(it);
        spdlog::warn(
            "checkpoint: {} names iteration {} (a rollback): it is loaded, and the newer {} "
            "left as they are until this run saves over them (a pinned one is kept aside)",
            kLatestFile, *state.latest, newer);
      }
    }
    // Nobody looks for checkpoints while rank 0 is cleaning up.
    if (options_.groups != nullptr) options_.groups->world->barrier();
  }
  std::optional<std::string> from;
  const bool pick = c.load_iteration >= 0;  // checkpoint.load_iteration (Megatron's --ckpt-step)
  if (c.resume && !c.dir.empty()) {
    from = find_checkpoint(c.dir);
    if (from && pick) {
      const std::optional<int64_t> latest = read_latest(c.dir);
      from = find_checkpoint_at(c.dir, c.load_iteration, "checkpoint.load_iteration");
      if (latest && *latest > c.load_iteration && is_logging_rank_)
        spdlog::warn(
            "checkpoint: checkpoint.load_iteration {} loads an older checkpoint than the latest "
            "({}); this run's saves replace the newer ones, and a requeued job with this setting "
            "starts from {} again: remove the key once the run has saved",
            c.load_iteration, *latest, c.load_iteration);
    }
  }
  // A fresh run never writes into another run's checkpoints: its iterations would sit beside
  // theirs and move their latest back.
  if (!c.resume && !c.dir.empty()) {
    if (const std::optional<std::string> other = find_checkpoint(c.dir))
      throw invalid_argument(
          "checkpoint.dir " + c.dir + " holds another run's committed checkpoints (latest " +
              std::filesystem::path(*other).filename().string() +
              ") and checkpoint.resume is false; the fix: checkpoint.resume: true to continue "
              "that run, or a new checkpoint.dir for this one",
          "checkpoint.dir");
  }
  start_full_ = from.has_value();
  if (!from && !c.load.empty()) {
    from = find_checkpoint(c.load);
    if (from && pick)
      from = find_checkpoint_at(c.load, c.load_iteration, "checkpoint.load_iteration");
    if (!from)
      throw not_found("checkpoint.load: no committed checkpoint in " + c.load +
                          "; name a checkpoint root or one of its iter_NNNNNNN directories",
                      "checkpoint.load");
    start_full_ = c.load_optimizer;
  }
  if (!from && pick)
    throw not_found(
        "checkpoint.load_iteration is " + std::to_string(c.load_iteration) +
            " but there is no checkpoint to pick it from (checkpoint.dir " +
            (c.dir.empty() ? std::string("unset") : c.dir) + " holds none" +
            (c.load.empty() ? std::string(", checkpoint.load unset") : ", nor does " + c.load) +
            "); the fix: point checkpoint.load (or dir with resume: true) at the run, "
            "or remove the key",
        "checkpoint.load_iteration");
  if (!from) {
    if (c.resume && is_logging_rank_)
      spdlog::info("checkpoint: no checkpoint in {} yet; starting from scratch", c.dir);
    return;
  }
  start_checkpoint_ = *from;
  start_manifest_ = std::make_unique<CheckpointManifest>(read_manifest(start_checkpoint_));
  const CheckpointManifest& m = *start_manifest_;
  check_same_model(m, recipe_, start_checkpoint_, start_full_);
  if (start_full_ && !m.has_optimizer)
    throw Error(Code::kCorruption,
                "the checkpoint holds no optimizer state; set checkpoint.load_optimizer: false "
                "to start from its weights alone",
                start_checkpoint_);
  if (start_full_) {
    iteration_ = m.iteration;
    consumed_samples_ = m.consumed_samples;
    valid_consumed_samples_ = m.valid_consumed_samples;
    if (iteration_ >= total_iters_ && is_logging_rank_)
      spdlog::warn(
          "checkpoint {} is at iteration {}, the end of this schedule ({} iterations); "
          "raise schedule.train_iters or schedule.train_tokens to train further",
          start_checkpoint_, iteration_, total_iters_);
  }
}

void Trainer::load_start_checkpoint() {
  if (start_checkpoint_.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const CheckpointManifest& m = *start_manifest_;
  ShardIndex index(start_checkpoint_, m);
  index.prefer_replica(options_.topology != nullptr ? options_.topology->tensor_rank() : 0, stage_);
  // Mixed precision: a checkpoint saved in bf16 holds fp32 masters ("master.NAME") beside the
  // rounded weights. The exact fp32 weights are the masters wherever the checkpoint has them, so
  // an fp32 run takes its weights from them and a bf16 run its masters; a bf16 run from an fp32
  // checkpoint takes its masters from the fp32 weights (and its weights rounded from them).
  std::set<std::string> saved_masters;
  if (m.has_optimizer)
    for (const std::string& name : index.names("optim_"))
      if (name.starts_with(master_name(""))) saved_masters.insert(name);
  std::vector<StateTensor> values = model_->params().state();
  for (StateTensor& v : values)
    if (v.tensor.dtype() == acc_dtype(v.tensor.dtype()) && saved_masters.count(master_name(v.name)))
      v.name = master_name(v.name);
  load_state(index, values, *backend_);
  std::vector<StateTensor> masters, rest;
  for (StateTensor& s : optimizer_->state())
    (s.name.starts_with(master_name("")) ? masters : rest).push_back(std::move(s));
  for (StateTensor& s : masters)
    if (!saved_masters.count(s.name)) s.name = s.name.substr(master_name("").size());
  load_state(index, masters, *backend_);
  if (start_full_) {
    load_state(index, rest, *backend_);
    optimizer_->set_steps(m.optimizer_steps);
    skipped_iterations_ = m.skipped_iterations;
    skipped_tokens_ = m.skipped_tokens;
    // A checkpoint without scaler state (saved in fp32 or bf16) starts the scaler afresh.
    if (scaler_ && m.loss_scale > 0)
      scaler_->load({m.loss_scale, m.loss_scale_growth_tracker, m.loss_scale_hysteresis_tracker});
    if (Fp8Linears* fp8 = model_->fp8()) load_fp8_state(index, *fp8);
  }
  backend_->synchronize();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool same_layout = m.tensor == recipe_.parallel.tensor && m.pipeline == pipeline_size_ &&
                           m.data == data_size_ && m.zero_stage == recipe_.parallel.zero_stage;
  if (is_logging_rank_)
    spdlog::info(
        "checkpoint: {} {} (iteration {}, {} samples consumed; saved at tensor {} x "
        "pipeline {} x data {}{}{}) in {:.2f} s",
        start_full_ ? "resumed from" : "loaded the weights of", start_checkpoint_, m.iteration,
        m.consumed_samples, m.tensor, m.pipeline, m.data, m.zero_stage ? ", ZeRO-1" : "",
        same_layout ? "" : ", resharded", secs);
}

int64_t Trainer::valid_position(int64_t iteration) const {
  // Megatron-LM's rule: the evaluations of every eval.interval-th iteration so far. The extra
  // evaluation at the end of a run that is later extended reads ahead without moving it, so an
  // extended run evaluates on the samples a run that never stopped would have.
  if (recipe_.eval.interval <= 0) return 0;
  return iteration / recipe_.eval.interval * recipe_.eval.iters * recipe_.batch.global_batch_size;
}

RankShards Trainer::rank_shards() {
  const Topology* t = options_.topology;
  const int64_t tp = t != nullptr ? t->tensor_rank() : 0;
  RankShards shards;
  shards.coords = ShardCoords{tp, stage_, data_rank_};
  // The model once per (tensor, pipeline) rank; Adam's moments once too, or per data rank when
  // ZeRO-1 partitions them.
  if (data_rank_ == 0) {
    shards.model_file = model_file_name(tp, stage_);
    shards.model = model_->params().state();
    // precision: fp8's scaling state: its stage's layers', the same on every data rank.
    if (const Fp8Linears* fp8 = model_->fp8())
      for (StateTensor& s : fp8->state_tensors()) shards.model.push_back(std::move(s));
  }
  if (optimizer_->partitioned() || data_rank_ == 0) {
    shards.optim_file = optim_file_name(tp, stage_, data_rank_);
    shards.optim = optimizer_->state();
  }
  return shards;
}

double Trainer::save_checkpoint(const std::function<void(double)>& before_commit) {
  MTNLG_CHECK(saver_ != nullptr);
  RankShards shards = rank_shards();
  CheckpointManifest m;
  const int64_t seq = recipe_.model.seq_length;
  m.iteration = iteration_;
  m.consumed_samples = consumed_samples_;
  m.consumed_tokens = consumed_samples_ * seq;
  m.valid_consumed_samples = valid_position(iteration_);
  m.optimizer_steps = optimizer_->steps();
  m.lr = schedule_->lr_at(consumed_samples_ * seq - skipped_tokens_);
  m.skipped_iterations = skipped_iterations_;
  m.skipped_tokens = skipped_tokens_;
  if (scaler_) {
    m.loss_scale = scaler_->state().scale;
    m.loss_scale_growth_tracker = scaler_->state().growth_tracker;
    m.loss_scale_hysteresis_tracker = scaler_->state().hysteresis_tracker;
  }
  m.global_batch_size = batch_at_(consumed_samples_);
  m.seed = recipe_.seed;
  m.data_seed = recipe_.data.seed;
  m.next_micro_batch_id = consumed_samples_ / recipe_.parallel.micro_batch_size;
  m.tensor = recipe_.parallel.tensor;
  m.pipeline = pipeline_size_;
  m.data = data_size_;
  m.zero_stage = recipe_.parallel.zero_stage;
  m.micro_batch_size = recipe_.parallel.micro_batch_size;
  m.model = manifest_model(recipe_);
  m.recipe_yaml = recipe_to_yaml(recipe_);
  const SaveStats stats = saver_->save(std::move(shards), std::move(m), *backend_, before_commit);
  return stats.stall_ms;
}

bool Trainer::agree_to_stop() {
  const double limit_min = recipe_.schedule.exit_duration_minutes;
  const double elapsed_min =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() / 60.0;
  double signal = stop_signal_received();
  double out_of_time = limit_min > 0 && elapsed_min >= limit_min ? 1.0 : 0.0;
  if (options_.groups != nullptr && options_.groups->world->size() > 1) {
    Tensor t = Tensor::cpu({2}, DType::kF64);
    t.data_as<double>()[0] = signal;
    t.data_as<double>()[1] = out_of_time;
    options_.groups->world->all_reduce(t, ReduceOp::kMax);
    signal = t.data_as<double>()[0];
    out_of_time = t.data_as<double>()[1];
  }
  if (signal > 0) {
    stop_reason_ = StopReason::kSignal;
    stop_signal_ = static_cast<int>(signal);
    return true;
  }
  if (out_of_time > 0) {
    stop_reason_ = StopReason::kTimeLimit;
    return true;
  }
  return false;
}

}  // namespace mtnlg
