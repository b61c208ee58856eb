// parse_recipe / load_recipe: YAML text -> overrides -> key checks -> typed Recipe -> defaults
// and resolved paths -> validate_recipe.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "core/config/recipe.h"
#include "core/config/recipe_yaml.h"
#include "core/input_file.h"
#include "core/status.h"

namespace mtnlg {
namespace {

using recipe_detail::find;
using recipe_detail::join_path;

// Typed reads from one section (a map, or unset when the recipe leaves the section out).
// Each read leaves `out` at its default when the key is absent and says whether it was there.
class Section {
 public:
  Section(YAML::Node map, std::string path) : map_(std::move(map)), path_(std::move(path)) {}

  Section section(std::string_view key) const {
    return Section(find(map_, key).value_or(YAML::Node()), at(key));
  }
  std::optional<YAML::Node> get(std::string_view key) const { return find(map_, key); }
  std::string at(std::string_view key) const { return join_path(path_, key); }

  bool read(std::string_view key, int64_t& out) const {
    return read_with(key, out, recipe_detail::to_int);
  }
  bool read(std::string_view key, uint64_t& out) const {
    return read_with(key, out, recipe_detail::to_uint);
  }
  bool read(std::string_view key, double& out) const {
    return read_with(key, out, recipe_detail::to_double);
  }
  bool read(std::string_view key, bool& out) const {
    return read_with(key, out, recipe_detail::to_bool);
  }
  bool read(std::string_view key, std::string& out) const {
    return read_with(key, out, recipe_detail::to_string);
  }
  bool read(std::string_view key, int& out) const {
    int64_t wide = out;
    if (!read(key, wide)) return false;
    if (wide < -1000000 || wide > 1000000) {
      throw invalid_argument(fmt::format("{} is out of range for this key", wide), at(key));
    }
    out = static_cast<int>(wide);
    return true;
  }

  template <typename E>
  bool read_enum(std::string_view key, E& out,
                 std::initializer_list<std::pair<const char*, E>> names) const {
    const std::optional<YAML::Node> node = get(key);
    if (!node) return false;
    const std::string text = recipe_detail::to_string(*node, at(key));
    std::string valid;
    for (const auto& [name, value] : names) {
      if (text == name) {
        out = value;
        return true;
      }
      valid += valid.empty() ? name : fmt::format(", {}", name);
    }
    throw invalid_argument(fmt::format("'{}' is not one of {}; write e.g. {}: {}", text, valid,
                                       at(key), names.begin()->first),
                           at(key));
  }

  void require(std::string_view key, const char* what) const {
    if (!get(key)) {
      throw invalid_argument(fmt::format("required key is missing; set {} ({})", at(key), what),
                             at(key));
    }
  }

 private:
  template <typename T, typename F>
  bool read_with(std::string_view key, T& out, F convert) const {
    const std::optional<YAML::Node> node = get(key);
    if (!node) return false;
    out = convert(*node, at(key));
    return true;
  }

  YAML::Node map_;
  std::string path_;
};

std::string resolve_path(const std::string& path) {
  if (path.empty()) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

void read_model(const Section& s, ModelConfig& m) {
  s.require("num_layers", "the number of transformer layers, e.g. 24");
  s.require("hidden_size", "the model width, e.g. 1024");
  s.require("num_attention_heads", "the number of attention heads, e.g. 16");
  s.require("seq_length", "the training sequence length in tokens, e.g. 2048");
  s.read("num_layers", m.num_layers);
  s.read("hidden_size", m.hidden_size);
  s.read("num_attention_heads", m.num_attention_heads);
  s.read("seq_length", m.seq_length);
  if (!s.read("ffn_hidden_size", m.ffn_hidden_size)) m.ffn_hidden_size = 4 * m.hidden_size;
  if (!s.read("max_position_embeddings", m.max_position_embeddings)) {
    m.max_position_embeddings = m.seq_length;
  }
  s.read("vocab_size", m.vocab_size);
  s.read("make_vocab_size_divisible_by", m.make_vocab_size_divisible_by);
  s.read_enum("activation", m.activation,
              {{"gelu", Activation::kGelu}, {"gelu_tanh", Activation::kGeluTanh}});
  s.read("layernorm_epsilon", m.layernorm_epsilon);
  s.read("init_method_std", m.init_method_std);
  s.read("hidden_dropout", m.hidden_dropout);
  s.read("attention_dropout", m.attention_dropout);
  s.read_enum("attention_backend", m.attention_backend,
              {{"auto", AttentionBackend::kAuto},
               {"cudnn", AttentionBackend::kCudnn},
               {"flash2", AttentionBackend::kFlash2},
               {"blocked", AttentionBackend::kBlocked}});
  s.read("init_from", m.init_from);
  m.init_from = resolve_path(m.init_from);
}

void read_parallel(const Section& s, ParallelConfig& p) {
  s.read("tensor", p.tensor);
  s.read("pipeline", p.pipeline);
  s.read("virtual_pipeline", p.virtual_pipeline);
  s.read("data", p.data);
  s.read("micro_batch_size", p.micro_batch_size);
  s.read("zero_stage", p.zero_stage);
  s.read("activation_checkpointing", p.activation_checkpointing);
  s.read("sequence_parallel", p.sequence_parallel);
  s.read("timeout_s", p.timeout_s);
  s.read("overlap_grad_reduce", p.overlap_grad_reduce);
  s.read("grad_bucket_mb", p.grad_bucket_mb);
  s.read("cuda_graph", p.cuda_graph);
  s.read_enum("grad_reduce_dtype", p.grad_reduce_dtype,
              {{"fp32", Precision::kFP32}, {"bf16", Precision::kBF16}});
  s.read_enum("transport", p.transport,
              {{"auto", CpuTransport::kAuto},
               {"shm", CpuTransport::kShm},
               {"tcp", CpuTransport::kTcp},
               {"gloo", CpuTransport::kGloo}});
}

void read_eval_tasks(const Section& s, EvalConfig& e) {
  if (const std::optional<YAML::Node> tasks = s.get("tasks")) {
    const std::string path = s.at("tasks");
    if (!tasks->IsSequence())
      throw invalid_argument(fmt::format("expected a list of task names, got {}; write {}: "
                                         "[lambada_openai, piqa]",
                                         recipe_detail::describe(*tasks), path),
                             path);
    e.tasks.clear();
    for (size_t i = 0; i < tasks->size(); ++i)
      e.tasks.push_back(recipe_detail::to_string((*tasks)[i], fmt::format("{}[{}]", path, i)));
  }
  s.read("tasks_interval", e.tasks_interval);
  if (s.read("task_dir", e.task_dir)) e.task_dir = resolve_path(e.task_dir);
  s.read("num_fewshot", e.num_fewshot);
  s.read("tasks_limit", e.tasks_limit);
  if (s.read("vocab_file", e.vocab_file)) e.vocab_file = resolve_path(e.vocab_file);
  if (s.read("merge_file", e.merge_file)) e.merge_file = resolve_path(e.merge_file);
}

void read_optimizer(const Section& s, OptimizerConfig& o) {
  s.read("lr", o.lr);
  s.read("min_lr", o.min_lr);
  if (const std::optional<YAML::Node> betas = s.get("betas")) {
    const std::string path = s.at("betas");
    if (!betas->IsSequence() || betas->size() != 2) {
      throw invalid_argument(fmt::format("expected two numbers [beta1, beta2], got {}; write {}: "
                                         "[0.9, 0.95]",
                                         recipe_detail::describe(*betas), path),
                             path);
    }
    o.beta1 = recipe_detail::to_double((*betas)[0], path + "[0]");
    o.beta2 = recipe_detail::to_double((*betas)[1], path + "[1]");
  }
  s.read("eps", o.eps);
  s.read("weight_decay", o.weight_decay);
  s.read("clip_grad", o.clip_grad);
  s.read("loss_scale", o.loss_scale);
  s.read("initial_loss_scale", o.initial_loss_scale);
  s.read("loss_scale_window", o.loss_scale_window);
  s.read("hysteresis", o.hysteresis);
  s.read("min_loss_scale", o.min_loss_scale);
}

void read_schedule(const Section& s, ScheduleConfig& sc) {
  s.read("warmup_tokens", sc.warmup_tokens);
  s.read("decay_tokens", sc.decay_tokens);
  s.read_enum("decay_style", sc.decay_style,
              {{"cosine", DecayStyle::kCosine},
               {"linear", DecayStyle::kLinear},
               {"constant", DecayStyle::kConstant}});
  const bool has_tokens = s.read("train_tokens", sc.train_tokens);
  const bool has_iters = s.read("train_iters", sc.train_iters);
  s.read("exit_duration_minutes", sc.exit_duration_minutes);
  if (!has_tokens && !has_iters) {
    throw invalid_argument(
        "required key is missing; set schedule.train_tokens (e.g. 270e9) or "
        "schedule.train_iters (e.g. 1000)",
        s.at("train_tokens"));
  }
}

void read_batch(const Section& s, BatchConfig& b) {
  s.require("global_batch_size", "sequences per iteration, e.g. 512");
  s.read("global_batch_size", b.global_batch_size);
  const Section ramp = s.section("rampup");
  ramp.read("start", b.rampup.start);
  ramp.read("increment", b.rampup.increment);
  ramp.read("tokens", b.rampup.tokens);
}

std::vector<double> read_split(const YAML::Node& node, const std::string& path) {
  const std::string fix = fmt::format("write {}: [949, 50, 1] or {}: \"949,50,1\"", path, path);
  std::vector<double> split;
  if (node.IsSequence()) {
    for (size_t k = 0; k < node.size(); ++k) {
      split.push_back(recipe_detail::to_double(node[k], fmt::format("{}[{}]", path, k)));
    }
  } else if (node.IsScalar()) {
    // Megatron's form: "969,30,1" (or with '/').
    const std::string text = node.Scalar();
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find_first_of(",/", start), text.size());
      std::string trimmed = text.substr(start, end - start);
      trimmed.erase(0, trimmed.find_first_not_of(" \t"));
      trimmed.erase(trimmed.find_last_not_of(" \t") + 1);
      try {
        split.push_back(recipe_detail::to_double(YAML::Node(trimmed), path));
      } catch (const Error&) {
        throw invalid_argument(
            fmt::format("'{}' is not a list of numbers train,valid,test; {}", text, fix), path);
      }
      start = end + 1;
    }
  } else {
    throw invalid_argument(fmt::format("expected three numbers train, valid, test, got {}; {}",
                                       recipe_detail::describe(node), fix),
                           path);
  }
  if (split.size() != 3) {
    throw invalid_argument(
        fmt::format("expected three numbers train, valid, test, got {}; {}", split.size(), fix),
        path);
  }
  return split;
}

void read_data(const Section& s, DataConfig& d) {
  s.require("blend", "a list of {prefix: PATH_PREFIX, weight: W} datasets");
  const YAML::Node blend = *s.get("blend");
  const std::string blend_path = s.at("blend");
  // check_tree has already made sure this is a list of maps.
  for (size_t k = 0; k < blend.size(); ++k) {
    const Section entry(blend[k], fmt::format("{}[{}]", blend_path, k));
    BlendEntry e;
    entry.require("prefix", "the path of PREFIX.bin / PREFIX.idx without the extension");
    entry.read("prefix", e.prefix);
    entry.read("weight", e.weight);
    e.prefix = resolve_path(e.prefix);
    d.blend.push_back(std::move(e));
  }
  if (const std::optional<YAML::Node> split = s.get("split")) {
    d.split = read_split(*split, s.at("split"));
  }
  s.read("seed", d.seed);
  s.read("shuffle", d.shuffle);
  if (!s.read("cache_dir", d.cache_dir)) d.cache_dir = "cache";
  d.cache_dir = resolve_path(d.cache_dir);
}

void read_checkpoint(const Section& s, CheckpointConfig& c) {
  s.read("dir", c.dir);
  c.dir = resolve_path(c.dir);
  s.read("save_interval", c.save_interval);
  s.read("keep_last", c.keep_last);
  s.read("async", c.async);
  s.read("resume", c.resume);
  s.read("load", c.load);
  c.load = resolve_path(c.load);
  s.read("load_optimizer", c.load_optimizer);
  s.read("load_iteration", c.load_iteration);
}

YAML::Node load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    const int line = e.mark.line + 1;
    throw invalid_argument(fmt::format("YAML syntax error at line {}, column {}: {}; fix the YAML "
                                       "there (indentation, a missing ':' or an unclosed bracket)",
                                       line, e.mark.column + 1, e.msg),
                           fmt::format("{}:{}", source, line));
  }
}

// The fp8: section: only with precision: fp8 (elsewhere it would be ignored silently).
void read_fp8(const Section& top, Recipe& r) {
  if (!top.get("fp8")) return;
  if (r.precision != Precision::kFP8)
    throw invalid_argument(fmt::format("fp8: settings apply to precision: fp8 only (this recipe is "
                                       "{}); set precision: fp8 or remove the fp8: section",
                                       precision_name(r.precision)),
                           "fp8");
  const Section s = top.section("fp8");
  s.read_enum("format", r.fp8.hybrid, {{"hybrid", true}, {"e4m3", false}});
  s.read_enum("scaling", r.fp8.scaling,
              {{"delayed", Fp8ScalingMode::kDelayed}, {"current", Fp8ScalingMode::kCurrent}});
  s.read("amax_history_len", r.fp8.amax_history_len);  // bounds: validate_bounds
  s.read("margin", r.fp8.margin);
  s.read_enum("amax_compute_algo", r.fp8.amax_algo,
              {{"max", Fp8AmaxAlgo::kMax}, {"most_recent", Fp8AmaxAlgo::kMostRecent}});
  s.read("cache_weights", r.fp8.cache_weights);
}

}  // namespace

Recipe parse_recipe(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& source) {
  YAML::Node root = load_yaml(yaml_text, source);
  if (!recipe_detail::is_unset(root) && !root.IsMap()) {
    throw invalid_argument(fmt::format("a recipe is a YAML map of sections (model:, parallel:, "
                                       "batch:, ...), got {}",
                                       recipe_detail::describe(root)),
                           source);
  }
  for (const std::string& o : overrides) recipe_detail::apply_override(root, o);
  recipe_detail::check_tree(root, source);

  const Section top(root, "");
  Recipe r;
  read_model(top.section("model"), r.model);
  read_parallel(top.section("parallel"), r.parallel);
  top.read_enum("precision", r.precision,
                {{"fp32", Precision::kFP32},
                 {"bf16", Precision::kBF16},
                 {"fp16", Precision::kFP16},
                 {"fp8", Precision::kFP8}});
  read_fp8(top, r);
  top.read_enum(
      "device", r.device,
      {{"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}});
  read_optimizer(top.section("optimizer"), r.optimizer);
  read_schedule(top.section("schedule"), r.schedule);
  read_batch(top.section("batch"), r.batch);
  read_data(top.section("data"), r.data);
  read_checkpoint(top.section("checkpoint"), r.checkpoint);
  const Section logging = top.section("logging");
  logging.read("interval", r.logging.interval);
  if (!logging.read("metrics_file", r.logging.metrics_file))
    r.logging.metrics_file = "metrics.jsonl";
  r.logging.metrics_file = resolve_path(r.logging.metrics_file);
  logging.read("tensorboard_dir", r.logging.tensorboard_dir);
  r.logging.tensorboard_dir = resolve_path(r.logging.tensorboard_dir);
  const Section eval = top.section("eval");
  eval.read("interval", r.eval.interval);
  eval.read("iters", r.eval.iters);
  read_eval_tasks(eval, r.eval);
  const Section tokenizer = top.section("tokenizer");
  tokenizer.read("vocab_file", r.tokenizer.vocab_file);
  r.tokenizer.vocab_file = resolve_path(r.tokenizer.vocab_file);
  tokenizer.read("merge_file", r.tokenizer.merge_file);
  r.tokenizer.merge_file = resolve_path(r.tokenizer.merge_file);
  top.read("seed", r.seed);

  // decay_tokens defaults to the whole run, counted in tokens (bounded first: no overflow).
  recipe_detail::validate_bounds(r);
  r.schedule.decay_tokens_set = top.section("schedule").get("decay_tokens").has_value();
  if (!r.schedule.decay_tokens_set) {
    r.schedule.decay_tokens = r.schedule.train_tokens > 0
                                  ? r.schedule.train_tokens
                                  : r.schedule.train_iters * r.tokens_per_iteration();
  }
  recipe_detail::validate_recipe(r);
  return r;
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw not_found(fmt::format("recipe file {} does not exist; check the path (e.g. "
                                "configs/demo-cpu.yaml)",
                                path),
                    path);
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw invalid_argument(
        fmt::format("{} is a directory; pass a recipe .yaml file inside it", path), path);
  }
  // A FIFO or device as the recipe is refused before it can block the read.
  return parse_recipe(read_input_file(path, "pass a recipe .yaml file"), overrides, path);
}

}  // namespace mtnlg
