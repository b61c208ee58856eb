// The recipe schema table, unknown-key checks with typo suggestions, and --set overrides.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "core/config/recipe_yaml.h"
#include "core/status.h"
#include "core/suggest.h"

namespace mtnlg::recipe_detail {
namespace {

constexpr Kind S = Kind::kScalar;

constexpr KeySpec kModel[] = {
    {"num_layers", S, {}},          {"hidden_size", S, {}},
    {"num_attention_heads", S, {}}, {"ffn_hidden_size", S, {}},
    {"seq_length", S, {}},          {"max_position_embeddings", S, {}},
    {"vocab_size", S, {}},          {"make_vocab_size_divisible_by", S, {}},
    {"activation", S, {}},          {"layernorm_epsilon", S, {}},
    {"init_method_std", S, {}},     {"hidden_dropout", S, {}},
    {"attention_dropout", S, {}},   {"init_from", S, {}},
    {"attention_backend", S, {}},
};
constexpr KeySpec kParallel[] = {
    {"tensor", S, {}},
    {"pipeline", S, {}},
    {"data", S, {}},
    {"micro_batch_size", S, {}},
    {"zero_stage", S, {}},
    {"activation_checkpointing", S, {}},
    {"sequence_parallel", S, {}},
    {"timeout_s", S, {}},
    {"overlap_grad_reduce", S, {}},
    {"grad_bucket_mb", S, {}},
    {"virtual_pipeline", S, {}},
    {"grad_reduce_dtype", S, {}},
    {"transport", S, {}},
    {"cuda_graph", S, {}},
};
constexpr KeySpec kOptimizer[] = {
    {"lr", S, {}},
    {"min_lr", S, {}},
    {"betas", Kind::kList, {}},
    {"eps", S, {}},
    {"weight_decay", S, {}},
    {"clip_grad", S, {}},
    {"loss_scale", S, {}},
    {"initial_loss_scale", S, {}},
    {"loss_scale_window", S, {}},
    {"hysteresis", S, {}},
    {"min_loss_scale", S, {}},
};
constexpr KeySpec kSchedule[] = {
    {"warmup_tokens", S, {}}, {"decay_tokens", S, {}}, {"decay_style", S, {}},
    {"train_tokens", S, {}},  {"train_iters", S, {}},  {"exit_duration_minutes", S, {}},
};
constexpr KeySpec kRampup[] = {{"start", S, {}}, {"increment", S, {}}, {"tokens", S, {}}};
constexpr KeySpec kBatch[] = {{"global_batch_size", S, {}}, {"rampup", Kind::kMap, kRampup}};
constexpr KeySpec kBlend[] = {{"prefix", S, {}}, {"weight", S, {}}};
constexpr KeySpec kData[] = {
    {"blend", Kind::kMapList, kBlend},
    {"split", Kind::kList, {}},
    {"seed", S, {}},
    {"shuffle", S, {}},
    {"cache_dir", S, {}},
};
constexpr KeySpec kCheckpoint[] = {
    {"dir", S, {}},
    {"save_interval", S, {}},
    {"keep_last", S, {}},
    {"async", S, {}},
    {"resume", S, {}},
    {"load", S, {}},
    {"load_optimizer", S, {}},
    {"load_iteration", S, {}},
};
constexpr KeySpec kLogging[] = {
    {"interval", S, {}}, {"metrics_file", S, {}}, {"tensorboard_dir", S, {}}};
constexpr KeySpec kEval[] = {
    {"interval", S, {}},       {"iters", S, {}},      {"tasks", Kind::kList, {}},
    {"tasks_interval", S, {}}, {"task_dir", S, {}},   {"num_fewshot", S, {}},
    {"tasks_limit", S, {}},    {"vocab_file", S, {}}, {"merge_file", S, {}},
};
constexpr KeySpec kFp8[] = {
    {"format", S, {}}, {"scaling", S, {}},           {"amax_history_len", S, {}},
    {"margin", S, {}}, {"amax_compute_algo", S, {}}, {"cache_weights", S, {}}};
constexpr KeySpec kTokenizer[] = {{"vocab_file", S, {}}, {"merge_file", S, {}}};
constexpr KeySpec kRecipe[] = {
    {"model", Kind::kMap, kModel},
    {"parallel", Kind::kMap, kParallel},
    {"precision", S, {}},
    {"fp8", Kind::kMap, kFp8},
    {"device", S, {}},
    {"optimizer", Kind::kMap, kOptimizer},
    {"schedule", Kind::kMap, kSchedule},
    {"batch", Kind::kMap, kBatch},
    {"data", Kind::kMap, kData},
    {"checkpoint", Kind::kMap, kCheckpoint},
    {"logging", Kind::kMap, kLogging},
    {"eval", Kind::kMap, kEval},
    {"tokenizer", Kind::kMap, kTokenizer},
    {"seed", S, {}},
};

const KeySpec* lookup(std::span<const KeySpec> specs, std::string_view name) {
  for (const KeySpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string list_keys(std::span<const KeySpec> specs) {
  std::string out;
  for (const KeySpec& spec : specs) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
}

std::optional<size_t> parse_index(const std::string& s) {
  size_t index = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return index;
}

[[noreturn]] void throw_not_a_map(const YAML::Node& node, const std::string& path,
                                  std::span<const KeySpec> specs) {
  throw invalid_argument(fmt::format("expected a map with keys ({}), got {}; write {}: followed "
                                     "by indented key: value lines",
                                     list_keys(specs), describe(node), path.empty() ? "it" : path),
                         path);
}

[[noreturn]] void throw_malformed(const std::string& text) {
  throw invalid_argument(
      fmt::format("override '{}' is not KEY.PATH=VALUE; write e.g. --set model.hidden_size=1024 "
                  "or --set optimizer.betas=[0.9,0.95]",
                  text),
      text);
}

// Sets parts[i..] under `node` (a map or null) whose keys are `specs`.
void set_path(YAML::Node node, std::span<const KeySpec> specs,
              const std::vector<std::string>& parts, size_t i, const std::string& path,
              const YAML::Node& value) {
  if (!is_unset(node) && !node.IsMap()) throw_not_a_map(node, path, specs);
  const std::string& name = parts[i];
  const KeySpec* spec = lookup(specs, name);
  if (spec == nullptr) throw_unknown_key(path, name, specs);
  const std::string child_path = join_path(path, name);
  if (i + 1 == parts.size()) {
    node[name] = value;
    return;
  }
  switch (spec->kind) {
    case Kind::kScalar:
      throw invalid_argument(
          fmt::format("{} is a single value with no keys below it; write --set {}=VALUE",
                      child_path, child_path),
          join_path(child_path, parts[i + 1]));
    case Kind::kMap:
      set_path(node[name], spec->children, parts, i + 1, child_path, value);
      return;
    case Kind::kList:
    case Kind::kMapList: {
      YAML::Node list = node[name];
      const std::optional<size_t> index = parse_index(parts[i + 1]);
      const size_t size = list.IsSequence() ? list.size() : 0;
      if (!index || *index >= size) {
        throw invalid_argument(
            fmt::format("{} has {} entries, so '{}' is not an entry index; use 0..{} or set the "
                        "whole list with --set {}=[...]",
                        child_path, size, parts[i + 1], size == 0 ? 0 : size - 1, child_path),
            join_path(child_path, parts[i + 1]));
      }
      const std::string entry_path = fmt::format("{}[{}]", child_path, *index);
      YAML::Node entry = list[*index];
      if (i + 2 == parts.size()) {
        entry = value;
      } else if (spec->kind == Kind::kMapList) {
        set_path(entry, spec->children, parts, i + 2, entry_path, value);
      } else {
        throw invalid_argument(
            fmt::format("{} is a single value with no keys below it; write --set {}.{}=VALUE",
                        entry_path, child_path, *index),
            entry_path);
      }
      return;
    }
  }
}

void check_map(const YAML::Node& node, std::span<const KeySpec> specs, const std::string& path);

void check_entry(const YAML::Node& value, const KeySpec& spec, const std::string& path) {
  if (is_unset(value)) return;
  switch (spec.kind) {
    case Kind::kScalar:
    case Kind::kList:
      return;  // the typed readers check scalars and lists
    case Kind::kMap:
      check_map(value, spec.children, path);
      return;
    case Kind::kMapList:
      if (!value.IsSequence()) {
        throw invalid_argument(
            fmt::format("expected a list of maps with keys ({}), got {}; write {}: [{{...}}, ...] "
                        "or one '- key: value' entry per line",
                        list_keys(spec.children), describe(value), path),
            path);
      }
      for (size_t k = 0; k < value.size(); ++k) {
        check_map(value[k], spec.children, fmt::format("{}[{}]", path, k));
      }
      return;
  }
}

void check_map(const YAML::Node& node, std::span<const KeySpec> specs, const std::string& path) {
  if (is_unset(node)) return;
  if (!node.IsMap()) throw_not_a_map(node, path, specs);
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      // At the top level the path is empty: check_tree names the file and this line instead.
      const YAML::Mark mark = kv.first.Mark();
      throw invalid_argument(
          fmt::format("a key must be a plain name, got {}{}; valid keys: {}", describe(kv.first),
                      mark.is_null() ? "" : fmt::format(" (line {})", mark.line + 1),
                      list_keys(specs)),
          path);
    }
    const std::string name = kv.first.Scalar();
    const KeySpec* spec = lookup(specs, name);
    if (spec == nullptr) throw_unknown_key(path, name, specs);
    const std::string child_path = join_path(path, name);
    if (!seen.insert(name).second) {
      throw invalid_argument("key appears twice in the same section; keep only one", child_path);
    }
    check_entry(kv.second, *spec, child_path);
  }
}

}  // namespace

std::span<const KeySpec> recipe_schema() {
  return kRecipe;
}

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string suggest_key(std::string_view key, std::span<const KeySpec> valid) {
  std::vector<std::string_view> names;
  for (const KeySpec& spec : valid) names.push_back(spec.name);
  return suggest_name(key, names);
}

void throw_unknown_key(const std::string& section_path, std::string_view key,
                       std::span<const KeySpec> valid) {
  const std::string suggestion = suggest_key(key, valid);
  const std::string where = section_path.empty() ? "at the top level" : "in " + section_path;
  const std::string fix = suggestion.empty() ? "remove it or fix its spelling."
                                             : fmt::format("did you mean '{}'?", suggestion);
  throw invalid_argument(
      fmt::format("unknown key '{}' {}; {} Valid keys: {}", key, where, fix, list_keys(valid)),
      join_path(section_path, key));
}

void apply_override(YAML::Node& root, const std::string& override_text) {
  const size_t eq = override_text.find('=');
  if (eq == std::string::npos || eq == 0) throw_malformed(override_text);
  const std::string key = override_text.substr(0, eq);
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
    if (part.empty() || part.find_first_of(" \t") != std::string::npos) {
      throw_malformed(override_text);
    }
    parts.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node value;
  try {
    value = YAML::Load(override_text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw invalid_argument(fmt::format("the value of override '{}' is not valid YAML ({}); quote "
                                       "strings that hold YAML syntax, e.g. {}='a: b'",
                                       override_text, e.msg, key),
                           override_text);
  }
  set_path(root, recipe_schema(), parts, 0, "", value);
}

void check_tree(const YAML::Node& root, const std::string& source) {
  try {
    check_map(root, recipe_schema(), "");
  } catch (const Error& e) {
    // Every error names where: a key path, or for the top level the file.
    if (!e.context().empty()) throw;
    throw Error(e.code(), e.message(), source);
  }
}

bool is_unset(const YAML::Node& node) {
  return !node.IsDefined() || node.IsNull();
}

std::optional<YAML::Node> find(const YAML::Node& map, std::string_view key) {
  if (!map.IsDefined() || !map.IsMap()) return std::nullopt;
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) {
      if (is_unset(kv.second)) return std::nullopt;
      return kv.second;
    }
  }
  return std::nullopt;
}

}  // namespace mtnlg::recipe_detail
