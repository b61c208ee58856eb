// Trainer: wires the layers into the training loop. Built as a library so tests drive it.
//
//   for each iteration: the global batch (batch ramp) -> for each micro-batch from the loader:
//   forward, backward (gradient accumulation) -> global grad norm -> clip -> AdamW step ->
//   one metrics line (data parallel: gradients summed over the data group first; with
//   parallel.zero_stage 1, reduce-scattered instead and AdamW run on this rank's partition,
//   optim/zero_optimizer.h); every eval.interval iterations, the loss on the valid split.
// Pipeline parallel: this rank runs one stage's layers and the micro-batches go through the 1F1B
// schedule (parallel/pipeline_schedule.h); every stage reads the same micro-batches; the tied
// embedding's gradient is summed over the first and last stage; loss and grad norm are summed over
// the pipeline group so that every rank logs and clips alike.
//
// Everything is counted in tokens: the LR schedule, the batch ramp, the end of training.
//
// Checkpoints (checkpoint.dir): the Trainer decides when (every save_interval iterations, at the
// end, and when the run is stopped); checkpoint/ does the writing. A run resumes from
// checkpoint.dir's latest committed checkpoint (checkpoint.resume) or starts from checkpoint.load,
// at the exact data position, schedule and RNG streams of the run that saved it. Stops: a stop
// signal (core/stop_signal.h) on any rank, or schedule.exit_duration_minutes, ends the run at the
// next iteration boundary, all ranks agreeing, after a save (stop_reason()).
// Not thread-safe (the Loader's prefetch thread and an asynchronous save's thread are internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/tokenizer_files.h"
#include "cmd/device_select.h"
#include "cmd/planner.h"
#include "cmd/stage_scorer.h"
#include "cmd/task_eval.h"
#include "core/backend.h"
#include "core/config/recipe.h"
#include "data/loader.h"
#include "model/captured_micro_batch.h"
#include "model/gpt_scorer.h"
#include "model/param_registry.h"
#include "optim/captured_adamw_step.h"
#include "optim/divergence.h"
#include "optim/loss_scaler.h"
#include "parallel/pipeline_schedule.h"

namespace mtnlg {

class GPTStage;
class Optimizer;
class LrSchedule;
class MetricsWriter;
class TensorBoardWriter;
class CheckpointSaver;
struct RankShards;
struct CheckpointManifest;
class Loader;
class SampleSource;
struct StageActivations;

struct ProcessGroups;
class GradSync;
class Topology;
class P2PCommunicator;

// The Trainer's test seams (tests reach them; mtnlg-train sets none). before_backward runs on
// every rank after an iteration's gradients are zeroed and before its micro-batches, with the
// iteration about to run (1-based), the rank's global rank and its parameters: a test puts an inf
// into the gradients there to force an fp16 overflow.
struct StepSeam {
  int64_t iteration;
  int64_t global_rank;
  ParamRegistry& params;
  Backend& backend;
};
struct TrainerHooks {
  std::function<void(const StepSeam&)> before_backward;
};

struct TrainerOptions {
  int threads = 0;          // CPU threads; <= 0: all cores
  bool write_files = true;  // metrics file and resolved recipe (tests may turn them off)
  // Multi-rank runs: this rank's place and its groups (owned by the caller, outliving the
  // Trainer). Null: one process.
  const Topology* topology = nullptr;
  ProcessGroups* groups = nullptr;
  int64_t node = 0;        // this rank's node (ranks on one node share its memory)
  int64_t local_rank = 0;  // rank on its node: picks its GPU (local_rank % visible GPUs)
  // Where this rank trains, when the caller resolved it (it builds the groups to match); null:
  // the Trainer resolves the recipe's device for local_rank.
  const DeviceResolution* device = nullptr;
  TrainerHooks hooks = {};
};

struct IterationStats {
  int64_t iteration = 0;
  double loss = 0.0;
  double lr = 0.0;
  int64_t global_batch_size = 0;
  int64_t consumed_samples = 0;  // after this iteration
  int64_t consumed_tokens = 0;
  double grad_norm = 0.0;  // before clipping
  double tokens_per_sec = 0.0;
  double elapsed_ms = 0.0;
  double tflops_per_device = 0.0;  // achieved model TFLOP/s per device (planner.h's formula)
  double mfu = -1.0;  // tflops_per_device / the device's datasheet dense peak; < 0: no peak known
  int64_t peak_memory_bytes = 0;    // the backend's peak_bytes() so far
  int64_t comm_bytes = 0;           // this rank sent this iteration, all groups (bytes_sent())
  double checkpoint_stall_ms = -1;  // a saving iteration: how long the save stalled training
  // fp16 loss scaling: the scale this iteration's backward used (1 without fp16), whether its
  // gradients overflowed on some rank so the update was skipped (grad_norm is then NaN), and
  // the skipped iterations so far.
  double loss_scale = 1.0;
  bool skipped = false;
  int64_t skipped_iterations = 0;
};

// Why run() returned.
enum class StopReason { kFinished, kSignal, kTimeLimit };

struct EvalStats {
  int64_t iteration = 0;  // the training iteration after which it ran
  double loss = 0.0;      // mean token cross entropy over eval.iters global batches
  double ppl = 0.0;       // exp(loss)
  int64_t samples = 0;
};

class Trainer {
 public:
  // Validates that this build can train `recipe`, opens the data, builds and initialises the
  // model (random init or model.init_from) and the optimizer.
  Trainer(const Recipe& recipe, const TrainerOptions& options);
  ~Trainer();

  // Trains until schedule.train_iters or schedule.train_tokens, or a stop (stop_reason());
  // returns every iteration's stats.
  std::vector<IterationStats> run();
  // One iteration, its metrics line written (exposed for tests; no checkpoint, no stop check).
  IterationStats train_step();
  StopReason stop_reason() const { return stop_reason_; }
  int stop_signal() const { return stop_signal_; }  // the agreed signal, with kSignal
  // Whether the stopped run saved a checkpoint (checkpoint.dir set) before returning.
  bool saved_at_stop() const { return saved_at_stop_; }
  int64_t iteration() const { return iteration_; }  // completed iterations (a resume starts here)
  // Saves a checkpoint of the current iteration now (collective); the stall in ms.
  // before_commit(stall_ms) runs once the state is safe (sync: every rank's files written; async:
  // copied) and before the checkpoint is committed (see CheckpointSaver::save).
  double save_checkpoint(const std::function<void(double)>& before_commit = {});
  // The loss on the next eval.iters global batches of the valid split (forward only).
  EvalStats evaluate();
  const std::vector<EvalStats>& evaluations() const { return evaluations_; }

  GPTStage& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  int64_t total_iterations() const { return total_iters_; }
  const Backend& backend() const { return *backend_; }
  // The planner's per-rank memory for this recipe (cmd/planner.h), logged beside the measured
  // peak after the first iteration and at the end.
  int64_t predicted_peak_bytes() const { return predicted_peak_bytes_; }

 private:
  // The constructor's steps, in order (each needs the ones before it).
  void build_layout_checks();
  void build_data();
  void select_device();
  void build_tasks();  // eval.tasks_interval: the checks and the tokenizer
  void build_model();
  void build_grad_sync();
  void build_optimizer();
  void build_pipeline();
  void build_outputs();
  IterationStats step();  // train_step without the metrics line
  // step()'s parts: where the iteration's clock and byte counts start; where the starting
  // weights came from (for the divergence message); the micro-batches' forwards and backwards
  // through the pipeline schedule, gradients scaled by grad_scale, returning this rank's loss
  // sum; the iteration's figures.
  struct StepStart {
    std::chrono::steady_clock::time_point time;
    CommBytes bytes;
    double p2p_seconds;
  };
  StepStart step_start() const;
  WeightsSource weights_source() const;
  // The step's summed loss on this rank, read from the device unless read_loss is false (a
  // captured optimizer step reads it with its words; 0 returned then).
  double forward_backward(int64_t global_batch, double grad_scale, bool read_loss = true);
  IterationStats step_stats(const StepStart& start, const StepHealth& health, double lr,
                            double loss_scale, int64_t global_batch);
  void log_iteration(const IterationStats& s);
  EvalStats compute_evaluation();  // evaluate() without its metrics line
  void log_evaluation(const EvalStats& e);
  std::vector<TaskMetrics> compute_tasks();  // eval.tasks, as mtnlg-eval --tasks scores them
  // Whether compute_tasks scores on packed f32 rows (one CPU process, fp32 or bf16) rather than
  // through the run's own forward (StageScorer).
  bool tasks_on_rows() const;
  void log_tasks(const std::vector<TaskMetrics>& tasks);
  // Checkpoint to start from (before the loaders: the data position is in its manifest).
  void find_start_checkpoint();
  // Its tensors (after the model and the optimizer exist).
  void load_start_checkpoint();
  // Collective over the world: true when any rank got a stop signal or ran out of time.
  bool agree_to_stop();
  // What this rank saves (borrowing the live tensors).
  RankShards rank_shards();
  // The validation loader's position once `iteration` iterations are done.
  int64_t valid_position(int64_t iteration) const;
  void log_memory(const char* when) const;
  double sum_over_data(double local) const;      // all-reduce of one number over the data group
  double sum_over_pipeline(double local) const;  // ... over the pipeline group
  double grad_norm();  // the global gradient norm (collective over data and pipeline groups)
  CommBytes bytes_sent() const;  // this rank's groups' bytes_sent() so far (data + data_grads)

  Recipe recipe_;
  TrainerOptions options_;
  // The global batch (samples) of the iteration that starts after a number of consumed samples:
  // the one source for the loader (which samples), step() and the checkpoint manifest.
  std::function<int64_t(int64_t)> batch_at_;
  DeviceResolution device_;
  std::unique_ptr<Backend> backend_;
  // The device's datasheet dense peak TFLOP/s for the recipe's precision (core/device_peak.h),
  // the basis of the metrics' mfu; 0 where none is known (a CPU, an unlisted GPU).
  double peak_tflops_ = 0.0;
  std::unique_ptr<SampleSource> train_data_, valid_data_;
  std::unique_ptr<Loader> train_loader_, valid_loader_;
  std::unique_ptr<GPTStage> model_;
  std::optional<LossSum> step_loss_;  // forward_backward's, kept on the device between steps
  // parallel.cuda_graph: the micro-batches replayed from a recording (one rank, one stage).
  std::unique_ptr<CapturedMicroBatch> captured_;
  std::unique_ptr<Optimizer> optimizer_;  // AdamW, or ZeroAdamW with ZeRO-1 and data ranks
  // parallel.cuda_graph with plain AdamW: the norm, clip and update replayed on the device, the
  // host reading the step's loss, norm and skip once after it.
  std::unique_ptr<CapturedAdamWStep> captured_step_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;  // precision fp16 only
  // Overflow-skipped iterations and their tokens (the LR schedule counts only updated tokens).
  int64_t skipped_iterations_ = 0, skipped_tokens_ = 0;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // logging.tensorboard_dir, with metrics_
  // Per model chunk, one per micro-batch of it in flight: micro-batch k of chunk c uses
  // acts_[c][k % size] (parallel/pipeline_schedule.h max_in_flight, max_in_flight_per_chunk;
  // one without pipeline parallelism).
  std::vector<std::vector<std::unique_ptr<StageActivations>>> acts_;
  // The interleaved schedule: this iteration's micro-batches as read at chunk 0's forward, for the
  // last chunk's targets (k % pipeline of the current group).
  std::vector<MicroBatch> pending_batches_;
  std::unique_ptr<P2PCommunicator> p2p_;  // this stage's neighbours (no-op for one stage)
  PipelineBuffers pipeline_buffers_;      // its receive buffers, made once (training and eval)
  std::unique_ptr<GradSync> grad_sync_;   // data parallel only; may own a comm thread
  int64_t data_size_ = 1, data_rank_ = 0;
  int64_t pipeline_size_ = 1, stage_ = 0;  // pipeline parallelism: this rank's stage
  bool is_logging_rank_ = true;            // global rank 0 writes the metrics
  std::vector<EvalStats> evaluations_;
  // eval.tasks_interval: GPT-2's BPE and the packed scorer over the live model.
  std::shared_ptr<const Gpt2Tokenizer> task_tokenizer_;
  std::unique_ptr<Scorer> task_scorer_;
  std::unique_ptr<GPTStage> task_model_;  // bf16 runs: the fp32 copy the scorer reads
  int64_t total_iters_ = 0;
  int64_t iteration_ = 0;
  int64_t start_iteration_ = 0;    // where run() began (a resume's checkpoint)
  double pipeline_seconds_ = 0.0;  // training steps' time in pipeline send/recv (p2p_)
  int64_t consumed_samples_ = 0;
  int64_t valid_consumed_samples_ = 0;  // the valid loader's position
  // Checkpointing: the saver (checkpoint.dir set), the checkpoint this run starts from.
  std::unique_ptr<CheckpointSaver> saver_;
  std::optional<TokenizerFiles> checkpoint_tokenizer_;  // what every checkpoint carries
  std::string start_checkpoint_;
  std::unique_ptr<CheckpointManifest> start_manifest_;
  bool start_full_ = false;  // resume everything, not only the weights
  StopReason stop_reason_ = StopReason::kFinished;
  int stop_signal_ = 0;
  bool saved_at_stop_ = false;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  double train_seconds_ = 0.0;
  int64_t predicted_peak_bytes_ = 0;
  int64_t predicted_outside_bytes_ = 0;  // the plan's device overheads outside the allocator
  // Bytes this rank sent during train_step (evaluations excluded), summed over the iterations.
  CommBytes comm_sent_;
  int64_t comm_iterations_ = 0;
};

// Iterations the recipe trains for, with the batch ramp (optim/batch_ramp.h run_length).
int64_t planned_iterations(const Recipe& recipe);

}  // namespace mtnlg
