// Value checks on a parsed recipe (impossible values, layout divisibility) and
// check_supported (features this build cannot train yet).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/checked_math.h"
#include "core/config/recipe.h"
#include "core/config/recipe_yaml.h"
#include "core/status.h"

namespace mtnlg {
namespace recipe_detail {
namespace {

void expect(bool ok, const char* key, const std::string& message) {
  if (!ok) throw invalid_argument(message, key);
}

void positive(int64_t value, const char* key) {
  expect(value > 0, key, fmt::format("{}: {} must be positive; set it to 1 or more", key, value));
}

void non_negative(int64_t value, const char* key) {
  expect(value >= 0, key,
         fmt::format("{}: {} must not be negative; set it to 0 or more", key, value));
}

void dropout(double p, const char* key) {
  expect(p >= 0.0 && p < 1.0, key,
         fmt::format("{}: {} is not a probability in [0, 1); use e.g. 0.1, or 0.0 to disable", key,
                     p));
}

// "a: x does not divide b: y" — names both keys and numbers, and the fix.
void divides(int64_t divisor, const char* divisor_key, int64_t value, const char* value_key,
             const char* context) {
  expect(value % divisor == 0, context,
         fmt::format("{}: {} does not divide {}: {}; choose values where {} is a multiple of {}",
                     divisor_key, divisor, value_key, value, value_key, divisor_key));
}

void validate_model(const ModelConfig& m, const ParallelConfig& p) {
  positive(m.num_layers, "model.num_layers");
  positive(m.hidden_size, "model.hidden_size");
  positive(m.num_attention_heads, "model.num_attention_heads");
  positive(m.ffn_hidden_size, "model.ffn_hidden_size");
  positive(m.seq_length, "model.seq_length");
  positive(m.max_position_embeddings, "model.max_position_embeddings");
  positive(m.vocab_size, "model.vocab_size");
  positive(m.make_vocab_size_divisible_by, "model.make_vocab_size_divisible_by");
  expect(m.layernorm_epsilon > 0.0, "model.layernorm_epsilon",
         fmt::format("model.layernorm_epsilon: {} must be positive; use e.g. 1.0e-5",
                     m.layernorm_epsilon));
  expect(
      m.init_method_std > 0.0, "model.init_method_std",
      fmt::format("model.init_method_std: {} must be positive; use e.g. 0.02", m.init_method_std));
  dropout(m.hidden_dropout, "model.hidden_dropout");
  dropout(m.attention_dropout, "model.attention_dropout");
  expect(m.max_position_embeddings >= m.seq_length, "model.max_position_embeddings",
         fmt::format("model.max_position_embeddings: {} is less than model.seq_length: {}; set "
                     "max_position_embeddings to at least {} or shorten seq_length",
                     m.max_position_embeddings, m.seq_length, m.seq_length));
  divides(m.num_attention_heads, "model.num_attention_heads", m.hidden_size, "model.hidden_size",
          "model.num_attention_heads");
  divides(p.tensor, "parallel.tensor", m.num_attention_heads, "model.num_attention_heads",
          "parallel.tensor");
  divides(p.tensor, "parallel.tensor", m.ffn_hidden_size, "model.ffn_hidden_size",
          "parallel.tensor");
  divides(p.pipeline, "parallel.pipeline", m.num_layers, "model.num_layers", "parallel.pipeline");
  if (p.virtual_pipeline > 1) {
    expect(p.pipeline > 1, "parallel.virtual_pipeline",
           fmt::format("parallel.virtual_pipeline: {} needs parallel.pipeline > 1 (it interleaves "
                       "model chunks over pipeline stages; pipeline is 1); set "
                       "parallel.virtual_pipeline: 1 or a pipeline size",
                       p.virtual_pipeline));
    const int64_t chunks = p.pipeline * p.virtual_pipeline;
    expect(p.pipeline <= 1 || m.num_layers % chunks == 0, "parallel.virtual_pipeline",
           fmt::format("model.num_layers: {} does not divide into parallel.pipeline {} x "
                       "parallel.virtual_pipeline {} = {} model chunks of equal size; choose a "
                       "virtual_pipeline that divides num_layers / pipeline = {}",
                       m.num_layers, p.pipeline, p.virtual_pipeline, chunks,
                       m.num_layers / p.pipeline));
  }
  // With tensor 1 sequence parallelism has nothing to split and is off, as Megatron-LM turns it
  // off (so a recipe keeps it across conversions to one tensor rank); the plan says so.
  if (p.sequence_parallel && p.tensor > 1)
    divides(p.tensor, "parallel.tensor", m.seq_length, "model.seq_length",
            "parallel.sequence_parallel");
}

// "key: v is more than the largest supported value max (why)".
void at_most(int64_t value, int64_t max, const char* key, const char* why) {
  expect(value <= max, key,
         fmt::format("{}: {} is more than {}, the largest this build takes ({}); lower it", key,
                     value, max, why));
}

void validate_parallel(const ParallelConfig& p) {
  positive(p.tensor, "parallel.tensor");
  positive(p.pipeline, "parallel.pipeline");
  expect(
      p.data >= 0, "parallel.data",
      fmt::format("parallel.data: {} must be 0 (derive from the world size) or positive", p.data));
  positive(p.micro_batch_size, "parallel.micro_batch_size");
  expect(p.zero_stage == 0 || p.zero_stage == 1, "parallel.zero_stage",
         fmt::format("parallel.zero_stage: {} is not supported; use 0 (no sharding) or 1 "
                     "(optimizer state sharded over data-parallel ranks)",
                     p.zero_stage));
  positive(p.timeout_s, "parallel.timeout_s");
  // Converted to milliseconds (and by Gloo to nanoseconds) downstream: keep it far from overflow.
  constexpr int64_t kMaxTimeoutS = 30LL * 24 * 3600;
  expect(
      p.timeout_s <= kMaxTimeoutS, "parallel.timeout_s",
      fmt::format("parallel.timeout_s: {} s is more than 30 days ({} s); a hung peer would never "
                  "be reported: use at most {}",
                  p.timeout_s, kMaxTimeoutS, kMaxTimeoutS));
  positive(p.virtual_pipeline, "parallel.virtual_pipeline");
  expect(p.grad_bucket_mb > 0.0, "parallel.grad_bucket_mb",
         fmt::format("parallel.grad_bucket_mb: {} must be positive (MiB per gradient bucket; "
                     "default 25)",
                     p.grad_bucket_mb));
}

void validate_optimizer(const OptimizerConfig& o) {
  expect(o.lr >= 0.0, "optimizer.lr",
         fmt::format("optimizer.lr: {} is negative; use a positive rate such as 1.0e-4", o.lr));
  expect(o.min_lr >= 0.0, "optimizer.min_lr",
         fmt::format("optimizer.min_lr: {} is negative; use 0 or a positive rate", o.min_lr));
  expect(o.min_lr <= o.lr, "optimizer.min_lr",
         fmt::format("optimizer.min_lr: {} is greater than optimizer.lr: {}; set min_lr <= lr "
                     "(e.g. lr / 10)",
                     o.min_lr, o.lr));
  const bool betas_ok = o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0;
  expect(betas_ok, "optimizer.betas",
         fmt::format("optimizer.betas: [{}, {}] must both be in [0, 1); use e.g. [0.9, 0.95]",
                     o.beta1, o.beta2));
  expect(o.eps > 0.0, "optimizer.eps",
         fmt::format("optimizer.eps: {} must be positive; use e.g. 1.0e-8", o.eps));
  expect(o.weight_decay >= 0.0, "optimizer.weight_decay",
         fmt::format("optimizer.weight_decay: {} is negative; use 0 or e.g. 0.1", o.weight_decay));
  // Decoupled decay multiplies each weight by (1 - lr x weight_decay) every step: at 1 or more it
  // zeroes or flips the weights, a divergence that would be blamed on the learning rate.
  expect(o.lr * o.weight_decay < 1.0, "optimizer.weight_decay",
         fmt::format("optimizer.weight_decay: {} times optimizer.lr: {} is {} (>= 1): every step "
                     "would zero or flip the weights; use e.g. 0.1",
                     o.weight_decay, o.lr, o.lr * o.weight_decay));
  expect(o.clip_grad >= 0.0, "optimizer.clip_grad",
         fmt::format("optimizer.clip_grad: {} is negative; use e.g. 1.0, or 0 to disable clipping",
                     o.clip_grad));
  // Loss scaling (fp16): powers of two keep the scaled gradients exact; any positive value works.
  expect(o.loss_scale >= 0.0, "optimizer.loss_scale",
         fmt::format("optimizer.loss_scale: {} is negative; use 0 (dynamic) or a static scale "
                     "such as 65536",
                     o.loss_scale));
  expect(o.initial_loss_scale > 0.0, "optimizer.initial_loss_scale",
         fmt::format("optimizer.initial_loss_scale: {} must be positive (Megatron's default "
                     "2^32 = 4294967296)",
                     o.initial_loss_scale));
  expect(o.loss_scale_window >= 1, "optimizer.loss_scale_window",
         fmt::format("optimizer.loss_scale_window: {} must be at least 1 (clean iterations "
                     "before the scale doubles; default 1000)",
                     o.loss_scale_window));
  expect(o.hysteresis >= 1, "optimizer.hysteresis",
         fmt::format("optimizer.hysteresis: {} must be at least 1 (overflowing iterations before "
                     "the scale halves; default 2)",
                     o.hysteresis));
  expect(
      o.min_loss_scale > 0.0, "optimizer.min_loss_scale",
      fmt::format("optimizer.min_loss_scale: {} must be positive (default 1)", o.min_loss_scale));
  expect(o.min_loss_scale <= o.initial_loss_scale, "optimizer.min_loss_scale",
         fmt::format("optimizer.min_loss_scale: {} is above optimizer.initial_loss_scale: {}; "
                     "lower it (default 1)",
                     o.min_loss_scale, o.initial_loss_scale));
}

void validate_schedule(const ScheduleConfig& s, int64_t tokens_per_iteration) {
  non_negative(s.warmup_tokens, "schedule.warmup_tokens");
  non_negative(s.train_tokens, "schedule.train_tokens");
  non_negative(s.train_iters, "schedule.train_iters");
  expect(s.exit_duration_minutes >= 0.0, "schedule.exit_duration_minutes",
         fmt::format("schedule.exit_duration_minutes: {} must not be negative; set 0 (off) or the "
                     "minutes after which to save and exit 75",
                     s.exit_duration_minutes));
  expect(s.train_tokens > 0 || s.train_iters > 0, "schedule.train_tokens",
         "schedule.train_tokens and schedule.train_iters are both 0; set one of them to the "
         "length of the run");
  if (!s.decay_tokens_set) {  // derived from the run's length: name what it came from
    const std::string length = s.train_tokens > 0
                                   ? fmt::format("schedule.train_tokens: {}", s.train_tokens)
                                   : fmt::format(
                                         "schedule.train_iters {} x {} tokens per iteration "
                                         "(batch.global_batch_size x model.seq_length) = {}",
                                         s.train_iters, tokens_per_iteration, s.decay_tokens);
    expect(s.decay_tokens >= s.warmup_tokens, "schedule.warmup_tokens",
           fmt::format("schedule.warmup_tokens: {} is longer than the whole run ({}), which the "
                       "decay ends with by default; shorten the warmup, lengthen the run, or set "
                       "schedule.decay_tokens",
                       s.warmup_tokens, length));
  }
  expect(s.decay_tokens >= s.warmup_tokens, "schedule.decay_tokens",
         fmt::format("schedule.decay_tokens: {} is less than schedule.warmup_tokens: {}; decay "
                     "counts from the start of training, so set decay_tokens >= warmup_tokens",
                     s.decay_tokens, s.warmup_tokens));
}

void validate_batch(const BatchConfig& b, const ParallelConfig& p) {
  positive(b.global_batch_size, "batch.global_batch_size");
  const int64_t micro = p.micro_batch_size;
  // The data-parallel size may come from the world size (data: 0); micro must divide anyway.
  const int64_t per_step = p.data > 0 ? micro * p.data : micro;
  const char* per_step_name =
      p.data > 0 ? "parallel.micro_batch_size * parallel.data" : "parallel.micro_batch_size";
  expect(b.global_batch_size % per_step == 0, "batch.global_batch_size",
         fmt::format("batch.global_batch_size: {} is not a multiple of {}: {}; choose a global "
                     "batch that is a multiple of {}",
                     b.global_batch_size, per_step_name, per_step, per_step));
  const RampupConfig& r = b.rampup;
  non_negative(r.start, "batch.rampup.start");
  non_negative(r.increment, "batch.rampup.increment");
  non_negative(r.tokens, "batch.rampup.tokens");
  if (r.start == 0) return;
  expect(r.start < b.global_batch_size, "batch.rampup.start",
         fmt::format("batch.rampup.start: {} must be less than batch.global_batch_size: {}; lower "
                     "it, or set start: 0 for no ramp",
                     r.start, b.global_batch_size));
  positive(r.increment, "batch.rampup.increment");
  positive(r.tokens, "batch.rampup.tokens");
  expect((b.global_batch_size - r.start) % r.increment == 0, "batch.rampup.increment",
         fmt::format("batch.rampup.increment: {} does not divide batch.global_batch_size: {} - "
                     "batch.rampup.start: {} = {}; choose an increment that steps exactly to the "
                     "global batch",
                     r.increment, b.global_batch_size, r.start, b.global_batch_size - r.start));
  expect(r.start % per_step == 0, "batch.rampup.start",
         fmt::format("batch.rampup.start: {} is not a multiple of {}: {}; every ramp step must "
                     "split evenly into micro-batches",
                     r.start, per_step_name, per_step));
  expect(r.increment % per_step == 0, "batch.rampup.increment",
         fmt::format("batch.rampup.increment: {} is not a multiple of {}: {}; every ramp step "
                     "must split evenly into micro-batches",
                     r.increment, per_step_name, per_step));
}

void validate_data(const DataConfig& d, const EvalConfig& e) {
  expect(!d.blend.empty(), "data.blend",
         "data.blend is empty; add at least one entry {prefix: PATH_PREFIX, weight: 1.0}");
  // The sample order is numpy's RandomState(seed)'s, as Megatron's: its seeds are 32-bit.
  expect(d.seed <= 0xffffffffULL, "data.seed",
         fmt::format("data.seed {} is past 2^32 - 1 (4294967295); the sample shuffles are numpy "
                     "RandomState's, as Megatron-LM's, which take 32-bit seeds",
                     d.seed));
  for (size_t k = 0; k < d.blend.size(); ++k) {
    const std::string at = fmt::format("data.blend[{}]", k);
    if (d.blend[k].prefix.empty()) {
      throw invalid_argument(
          "the prefix is empty; set it to the dataset path without .bin/.idx, e.g. "
          "data/mtnlg/books3_text_document",
          at + ".prefix");
    }
    if (!(d.blend[k].weight > 0.0)) {
      throw invalid_argument(fmt::format("weight {} must be positive; remove the entry instead of "
                                         "giving it weight 0",
                                         d.blend[k].weight),
                             at + ".weight");
    }
  }
  const std::vector<double>& s = d.split;
  expect(s.size() == 3 && s[0] >= 0.0 && s[1] >= 0.0 && s[2] >= 0.0, "data.split",
         fmt::format("data.split: [{}] must be three non-negative numbers train, valid, test; "
                     "write e.g. [949, 50, 1]",
                     fmt::join(s, ", ")));
  expect(s[0] > 0.0, "data.split",
         fmt::format("data.split: [{}] gives training no data; make the first (train) share "
                     "positive, e.g. [949, 50, 1]",
                     fmt::join(s, ", ")));
  expect(e.interval == 0 || s[1] > 0.0, "data.split",
         fmt::format("data.split: [{}] has no validation share but eval.interval is {}; give "
                     "valid a share, e.g. [949, 50, 1], or set eval.interval: 0",
                     fmt::join(s, ", "), e.interval));
}

void validate_rest(const Recipe& r) {
  // fp8 keeps bf16's weights and fp32 main gradients, so it reduces as bf16 does.
  expect(r.parallel.grad_reduce_dtype == Precision::kFP32 || r.precision == Precision::kBF16 ||
             r.precision == Precision::kFP8,
         "parallel.grad_reduce_dtype",
         fmt::format("parallel.grad_reduce_dtype: bf16 needs precision: bf16 or fp8 (it is {}): "
                     "an fp32 or fp16 run reduces its gradients in fp32; remove the key or set "
                     "precision: bf16",
                     precision_name(r.precision)));
  expect(r.tokenizer.vocab_file.empty() == r.tokenizer.merge_file.empty(),
         r.tokenizer.vocab_file.empty() ? "tokenizer.vocab_file" : "tokenizer.merge_file",
         fmt::format("tokenizer.{} is set but tokenizer.{} is not; a GPT-2 tokenizer is both "
                     "files: set tokenizer.vocab_file (encoder.json) and tokenizer.merge_file "
                     "(vocab.bpe)",
                     r.tokenizer.vocab_file.empty() ? "merge_file" : "vocab_file",
                     r.tokenizer.vocab_file.empty() ? "vocab_file" : "merge_file"));
  const CheckpointConfig& c = r.checkpoint;
  non_negative(c.save_interval, "checkpoint.save_interval");
  non_negative(c.keep_last, "checkpoint.keep_last");
  expect(c.load_iteration >= -1, "checkpoint.load_iteration",
         fmt::format("checkpoint.load_iteration is {}; it is an iteration to load (0 or more), "
                     "or -1 (the default) for the latest",
                     c.load_iteration));
  expect(c.load_iteration < 0 || c.resume || !c.load.empty(), "checkpoint.load_iteration",
         fmt::format("checkpoint.load_iteration is {} but nothing is loaded: set "
                     "checkpoint.resume: true (from checkpoint.dir) or checkpoint.load",
                     c.load_iteration));
  if (c.dir.empty()) {
    // Every setting that needs a checkpoint directory, named at once: turning checkpoints off
    // (--set checkpoint.dir=) then takes one try, not one error per key.
    std::vector<std::string> need, off;
    if (c.save_interval != 0) {
      need.push_back(fmt::format("checkpoint.save_interval is {}", c.save_interval));
      off.push_back("checkpoint.save_interval=0");
    }
    if (c.resume) {
      need.push_back("checkpoint.resume is true (it continues the run in checkpoint.dir)");
      off.push_back("checkpoint.resume=false");
    }
    if (r.schedule.exit_duration_minutes != 0.0) {
      need.push_back(fmt::format(
          "schedule.exit_duration_minutes is {} (the run would stop with nothing saved)",
          r.schedule.exit_duration_minutes));
      off.push_back("schedule.exit_duration_minutes=0");
    }
    if (!need.empty()) {
      std::string list, sets;
      for (size_t i = 0; i < need.size(); ++i) {
        list += (i ? "; " : "") + need[i];
        sets += " --set " + off[i];
      }
      throw invalid_argument("checkpoint.dir is not set but " + list +
                                 ". The fix: set checkpoint.dir: PATH, or for no checkpoints" +
                                 sets,
                             "checkpoint.dir");
    }
  }
  expect(r.logging.interval >= 1, "logging.interval",
         fmt::format("logging.interval: {} must be at least 1 (iterations between log lines)",
                     r.logging.interval));
  expect(!r.logging.metrics_file.empty(), "logging.metrics_file",
         "logging.metrics_file is empty; give the path of the JSON-lines metrics file, e.g. "
         "metrics.jsonl (it is always written)");
  non_negative(r.eval.interval, "eval.interval");
  non_negative(r.eval.iters, "eval.iters");
  expect(r.eval.interval == 0 || r.eval.iters > 0, "eval.iters",
         fmt::format("eval.interval is {} but eval.iters is {}; set eval.iters to the number of "
                     "validation batches per evaluation, e.g. 10",
                     r.eval.interval, r.eval.iters));
  const EvalConfig& e = r.eval;
  non_negative(e.tasks_interval, "eval.tasks_interval");
  non_negative(e.num_fewshot, "eval.num_fewshot");
  non_negative(e.tasks_limit, "eval.tasks_limit");
  expect(e.tasks_interval == 0 || !e.tasks.empty(), "eval.tasks",
         fmt::format("eval.tasks_interval is {} but eval.tasks is empty; list the tasks, e.g. "
                     "eval.tasks: [lambada_openai, piqa], or set eval.tasks_interval: 0",
                     e.tasks_interval));
  expect(e.tasks_interval == 0 || !e.task_dir.empty(), "eval.task_dir",
         fmt::format("eval.tasks_interval is {} but eval.task_dir is not set; give the directory "
                     "of TASK/SPLIT.jsonl (docs/evaluation.md)",
                     e.tasks_interval));
}

}  // namespace

void validate_model_bounds(const ModelConfig& m) {
  at_most(m.num_layers, 100'000, "model.num_layers", "10x the largest trained model");
  at_most(m.hidden_size, int64_t{1} << 20, "model.hidden_size", "2^20");
  at_most(m.num_attention_heads, int64_t{1} << 20, "model.num_attention_heads", "2^20");
  at_most(m.ffn_hidden_size, int64_t{1} << 22, "model.ffn_hidden_size", "2^22");
  at_most(m.seq_length, int64_t{1} << 24, "model.seq_length", "2^24 tokens");
  at_most(m.max_position_embeddings, int64_t{1} << 24, "model.max_position_embeddings",
          "2^24 positions");
  at_most(m.vocab_size, int64_t{1} << 30, "model.vocab_size", "2^30; token ids are int32");
  at_most(m.make_vocab_size_divisible_by, int64_t{1} << 20, "model.make_vocab_size_divisible_by",
          "2^20");
}

void validate_bounds(const Recipe& r) {
  const ModelConfig& m = r.model;
  validate_model_bounds(m);
  const ParallelConfig& p = r.parallel;
  at_most(p.tensor, 1024, "parallel.tensor", "1024 ranks per tensor group");
  at_most(p.pipeline, 100'000, "parallel.pipeline", "one stage per layer at most");
  at_most(p.data, int64_t{1} << 24, "parallel.data", "2^24 replicas");
  at_most(p.micro_batch_size, int64_t{1} << 24, "parallel.micro_batch_size", "2^24 samples");
  at_most(p.virtual_pipeline, 1024, "parallel.virtual_pipeline", "1024 chunks per rank");
  at_most(r.batch.global_batch_size, int64_t{1} << 30, "batch.global_batch_size", "2^30 samples");
  constexpr int64_t kMaxTokens = int64_t{1} << 60;  // 1.15e18: headroom for one more iteration
  at_most(r.schedule.train_iters, int64_t{1} << 40, "schedule.train_iters", "2^40 iterations");
  at_most(r.schedule.train_tokens, kMaxTokens, "schedule.train_tokens", "2^60 tokens");
  at_most(r.schedule.warmup_tokens, kMaxTokens, "schedule.warmup_tokens", "2^60 tokens");
  at_most(r.schedule.decay_tokens, kMaxTokens, "schedule.decay_tokens", "2^60 tokens");
  at_most(r.batch.rampup.tokens, kMaxTokens, "batch.rampup.tokens", "2^60 tokens");
  at_most(r.eval.iters, int64_t{1} << 30, "eval.iters", "2^30 batches");
  positive(r.fp8.amax_history_len, "fp8.amax_history_len");
  at_most(r.fp8.amax_history_len, 1'000'000, "fp8.amax_history_len",
          "a million steps; Transformer Engine's default is 1024");
  non_negative(r.fp8.margin, "fp8.margin");
  at_most(r.fp8.margin, 64, "fp8.margin", "the scale divided by 2^64");
  // The derived run length in tokens must stay within the same bound.
  const int64_t per_iteration =
      checked_mul(r.batch.global_batch_size, m.seq_length,
                  "batch.global_batch_size x model.seq_length", "batch.global_batch_size");
  const int64_t run_tokens = checked_mul(
      r.schedule.train_iters, per_iteration,
      "schedule.train_iters x batch.global_batch_size x model.seq_length", "schedule.train_iters");
  expect(run_tokens <= kMaxTokens, "schedule.train_iters",
         fmt::format("schedule.train_iters: {} iterations of {} tokens are {} tokens, more than "
                     "2^60; lower schedule.train_iters",
                     r.schedule.train_iters, per_iteration, run_tokens));
}

void validate_recipe(const Recipe& r) {
  validate_bounds(r);
  validate_parallel(r.parallel);
  validate_model(r.model, r.parallel);
  validate_batch(r.batch, r.parallel);  // before schedule: decay_tokens may derive from it
  validate_optimizer(r.optimizer);
  validate_schedule(r.schedule, r.tokens_per_iteration());
  validate_data(r.data, r.eval);
  validate_rest(r);
}

}  // namespace recipe_detail

void validate_model_config(const ModelConfig& model) {
  recipe_detail::validate_model_bounds(model);
  recipe_detail::validate_model(model, ParallelConfig{});
}

std::string cuda_graph_data_refusal(const Recipe& r, int64_t data_size) {
  const ParallelConfig& p = r.parallel;
  if (!p.cuda_graph || data_size <= 1 || p.zero_stage == 1 || !p.overlap_grad_reduce) return "";
  return fmt::format(
      "with {} data-parallel ranks (parallel.data, or the world's size) the gradients' "
      "reduction overlaps backward "
      "(parallel.overlap_grad_reduce: true), inside the captured micro-batch; set "
      "parallel.overlap_grad_reduce: false or parallel.zero_stage: 1 (the reduction after "
      "backward)",
      data_size);
}

void check_supported(const Recipe& r) {
  // Features that land in steps are refused here, naming their key (precision: fp8 runs in
  // every layout on both devices, its GEMMs emulated: model/fp8_linear.h). A captured
  // micro-batch (parallel.cuda_graph) has no communication inside and no per-call scales: one
  // stage without tensor parallelism, data parallelism only with the gradients reduced after
  // backward (not overlapped with it), and not fp8 (the host passes each cast's scale). The
  // data size derived from the world is checked by the trainer (cuda_graph_data_refusal).
  const ParallelConfig& p = r.parallel;
  if (!p.cuda_graph) return;
  const auto refuse = [](const std::string& what) {
    throw unsupported("parallel.cuda_graph: " + what +
                          "; set parallel.cuda_graph: false (the default) for this recipe",
                      "parallel.cuda_graph");
  };
  if (p.tensor > 1 || p.pipeline > 1 || p.virtual_pipeline > 1)
    refuse(
        fmt::format("a captured micro-batch runs as one stage without tensor shards "
                    "(parallel.tensor {}, parallel.pipeline {}, parallel.virtual_pipeline {}): "
                    "their communication waits for the device inside the micro-batch",
                    p.tensor, p.pipeline, p.virtual_pipeline));
  if (const std::string why = cuda_graph_data_refusal(r, p.data); !why.empty()) refuse(why);
  if (r.precision == Precision::kFP8)
    refuse("precision: fp8 passes each cast's scale from the host, which a replay would repeat");
}

}  // namespace mtnlg
