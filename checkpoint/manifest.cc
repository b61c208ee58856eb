#include "checkpoint/manifest.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_io.h"
#include "checkpoint/json_parse.h"
#include "checkpoint/shard_io.h"
#include "core/config/recipe.h"
#include "core/input_file.h"
#include "core/metrics.h"
#include "core/status.h"

namespace mtnlg {

namespace {

class Reader {
 public:
  Reader(const JsonValue& v, std::string where, const std::string& path)
      : v_(v), where_(std::move(where)), path_(path) {}

  const JsonValue& get(const std::string& key, JsonValue::Kind kind) const {
    const JsonValue* m = v_.find(key);
    if (m == nullptr) fail("has no \"" + at(key) + "\"");
    if (m->kind != kind)
      fail("\"" + at(key) + "\" is " + json_kind_name(m->kind) + ", expected " +
           json_kind_name(kind));
    return *m;
  }
  int64_t i64(const std::string& key) const {
    int64_t out = 0;
    if (!get(key, JsonValue::Kind::kNumber).to_int64(&out))
      fail("\"" + at(key) + "\" is not an integer");
    return out;
  }
  uint64_t u64(const std::string& key) const {
    const std::string& t = get(key, JsonValue::Kind::kNumber).text;
    try {
      size_t used = 0;
      const unsigned long long v = std::stoull(t, &used);
      if (used != t.size()) throw std::invalid_argument(t);
      return v;
    } catch (const std::exception&) {
      fail("\"" + at(key) + "\" is not an unsigned integer");
    }
  }
  double f64(const std::string& key) const {
    return std::stod(get(key, JsonValue::Kind::kNumber).text);
  }
  bool boolean(const std::string& key) const { return get(key, JsonValue::Kind::kBool).boolean; }
  bool has(const std::string& key) const { return v_.find(key) != nullptr; }
  const std::string& str(const std::string& key) const {
    return get(key, JsonValue::Kind::kString).text;
  }
  Reader object(const std::string& key) const {
    return Reader(get(key, JsonValue::Kind::kObject), at(key), path_);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw corruption("the manifest " + what +
                         "; the checkpoint is damaged: load an earlier one (mtnlg-ckpt verify "
                         "checks a directory)",
                     path_);
  }

 private:
  std::string at(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }
  const JsonValue& v_;
  std::string where_;
  const std::string& path_;
};

}  // namespace

std::string manifest_to_json(const CheckpointManifest& m) {
  JsonLine schedule, rng, layout, model;
  schedule.add("lr", m.lr)
      .add("global_batch_size", m.global_batch_size)
      .add("skipped_iterations", m.skipped_iterations)
      .add("skipped_tokens", m.skipped_tokens);
  JsonLine scaler;
  scaler.add("scale", m.loss_scale)
      .add("growth_tracker", m.loss_scale_growth_tracker)
      .add("hysteresis_tracker", m.loss_scale_hysteresis_tracker);
  rng.add("seed", m.seed)
      .add("data_seed", m.data_seed)
      .add("dropout", "philox(seed, sample / micro_batch_size)")
      .add("next_micro_batch_id", m.next_micro_batch_id);
  layout.add("tensor", m.tensor)
      .add("pipeline", m.pipeline)
      .add("data", m.data)
      .add("zero_stage", static_cast<int64_t>(m.zero_stage))
      .add("micro_batch_size", m.micro_batch_size);
  const ManifestModel& g = m.model;
  model.add("num_layers", g.num_layers)
      .add("hidden_size", g.hidden_size)
      .add("num_attention_heads", g.num_attention_heads)
      .add("ffn_hidden_size", g.ffn_hidden_size)
      .add("seq_length", g.seq_length)
      .add("max_position_embeddings", g.max_position_embeddings)
      .add("vocab_size", g.vocab_size)
      .add("padded_vocab_size", g.padded_vocab_size);
  std::string files = "[";
  for (size_t i = 0; i < m.files.size(); ++i) {
    JsonLine f;
    f.add("name", m.files[i].name)
        .add("bytes", m.files[i].bytes)
        .add("xxh3", checksum_text(m.files[i].xxh3));
    files += (i ? ",\n    " : "\n    ") + f.str();
  }
  files += m.files.empty() ? "]" : "\n  ]";
  JsonLine top;
  top.add("format_version", static_cast<int64_t>(m.format_version))
      .add("iteration", m.iteration)
      .add("consumed_samples", m.consumed_samples)
      .add("consumed_tokens", m.consumed_tokens)
      .add("valid_consumed_samples", m.valid_consumed_samples)
      .add("optimizer_steps", m.optimizer_steps)
      .add("has_optimizer", m.has_optimizer)
      .add_raw("schedule", schedule.str())
      .add_raw("loss_scaler", scaler.str())
      .add_raw("rng", rng.str())
      .add_raw("layout", layout.str())
      .add_raw("model", model.str())
      .add_raw("files", files)
      .add("recipe", m.recipe_yaml);
  return top.str() + "\n";
}

void validate_manifest(const CheckpointManifest& m, const std::string& path) {
  const auto bad = [&](const std::string& what) {
    throw corruption("the manifest" + what + "; the checkpoint is damaged: load an earlier one",
                     path);
  };
  if (m.iteration < 0) bad(" has iteration " + std::to_string(m.iteration));
  // Its directory's name is its iteration's.
  const std::string dir = std::filesystem::path(path).parent_path().filename().string();
  if (dir.rfind("iter_", 0) == 0 && dir.size() >= 12 &&
      dir.find_first_not_of("0123456789", 5) == std::string::npos &&
      dir != iteration_dir_name(m.iteration))
    bad(" says iteration " + std::to_string(m.iteration) + " but lies in " + dir);
  // The model: the recipe's own checks and bounds, so nothing is sized from an impossible one.
  ModelConfig model;
  model.num_layers = m.model.num_layers;
  model.hidden_size = m.model.hidden_size;
  model.num_attention_heads = m.model.num_attention_heads;
  model.ffn_hidden_size = m.model.ffn_hidden_size;
  model.seq_length = m.model.seq_length;
  model.max_position_embeddings = m.model.max_position_embeddings;
  model.vocab_size = m.model.vocab_size;
  try {
    validate_model_config(model);
  } catch (const Error& e) {
    bad("'s model is impossible (" + e.message() + ")");
  }
  const auto layout_value = [&](const char* key, int64_t v, int64_t hi) {
    if (v < 1 || v > hi)
      bad("'s layout." + std::string(key) + " is " + std::to_string(v) + " (1 to " +
          std::to_string(hi) + ")");
  };
  layout_value("tensor", m.tensor, 1 << 16);
  layout_value("pipeline", m.pipeline, 1 << 16);
  layout_value("data", m.data, 1 << 24);
  layout_value("micro_batch_size", m.micro_batch_size, 1 << 24);
  if (m.zero_stage != 0 && m.zero_stage != 1)
    bad("'s layout.zero_stage is " + std::to_string(m.zero_stage) + " (0 or 1)");
  if (m.model.num_attention_heads % m.tensor != 0 || m.pipeline > m.model.num_layers)
    bad("'s layout (tensor " + std::to_string(m.tensor) + ", pipeline " +
        std::to_string(m.pipeline) + ") does not divide its model (" +
        std::to_string(m.model.num_attention_heads) + " heads, " +
        std::to_string(m.model.num_layers) + " layers)");
  if (m.model.padded_vocab_size < m.model.vocab_size || m.model.padded_vocab_size % m.tensor != 0 ||
      m.model.padded_vocab_size > (int64_t{1} << 31))
    bad("'s model.padded_vocab_size " + std::to_string(m.model.padded_vocab_size) +
        " is not the vocabulary (" + std::to_string(m.model.vocab_size) +
        ") padded to a multiple of tensor " + std::to_string(m.tensor));
  // The files: each once, and exactly the shards its layout writes.
  std::set<std::string> names;
  for (const ManifestFile& f : m.files) {
    if (!names.insert(f.name).second) bad(" lists " + f.name + " twice");
    if (f.bytes < 0) bad(" gives " + f.name + " " + std::to_string(f.bytes) + " bytes");
  }
  std::set<std::string> shards;
  for (int64_t t = 0; t < m.tensor; ++t)
    for (int64_t p = 0; p < m.pipeline; ++p) {
      shards.insert(model_file_name(t, p));
      if (m.has_optimizer)
        for (int64_t d = 0; d < (m.zero_stage == 1 ? m.data : 1); ++d)
          shards.insert(optim_file_name(t, p, d));
    }
  for (const std::string& s : shards)
    if (!names.count(s)) bad(" does not list " + s + ", a shard its layout writes");
  for (const std::string& n : names)
    if (n.find('/') == std::string::npos && !shards.count(n))
      bad(" lists " + n + ", which its layout (tensor " + std::to_string(m.tensor) + ", pipeline " +
          std::to_string(m.pipeline) + ", data " + std::to_string(m.data) + ") has no place for");
}

CheckpointManifest parse_manifest(std::string_view text, const std::string& path) {
  const JsonValue root = parse_json(text, path);
  if (!root.is_object())
    throw corruption("the manifest is not a JSON object; the checkpoint is damaged", path);
  const Reader r(root, "", path);
  CheckpointManifest m;
  m.format_version = static_cast<int>(r.i64("format_version"));
  if (m.format_version > kCheckpointFormatVersion || m.format_version < 1)
    throw corruption("checkpoint format_version " + std::to_string(m.format_version) +
                         " is not one this build reads (it reads 1 to " +
                         std::to_string(kCheckpointFormatVersion) +
                         "); load it with the mtnlg-train that wrote it, or a newer one",
                     path);
  m.iteration = r.i64("iteration");
  m.consumed_samples = r.i64("consumed_samples");
  m.consumed_tokens = r.i64("consumed_tokens");
  m.valid_consumed_samples = r.i64("valid_consumed_samples");
  m.optimizer_steps = r.i64("optimizer_steps");
  m.has_optimizer = r.boolean("has_optimizer");
  const Reader schedule = r.object("schedule");
  m.lr = schedule.f64("lr");
  m.global_batch_size = schedule.i64("global_batch_size");
  if (schedule.has("skipped_iterations")) {  // written since fp16 loss scaling
    m.skipped_iterations = schedule.i64("skipped_iterations");
    m.skipped_tokens = schedule.i64("skipped_tokens");
  }
  if (r.has("loss_scaler")) {
    const Reader scaler = r.object("loss_scaler");
    m.loss_scale = scaler.f64("scale");
    m.loss_scale_growth_tracker = scaler.i64("growth_tracker");
    m.loss_scale_hysteresis_tracker = scaler.i64("hysteresis_tracker");
  }
  const Reader rng = r.object("rng");
  m.seed = rng.u64("seed");
  m.data_seed = rng.u64("data_seed");
  m.next_micro_batch_id = rng.i64("next_micro_batch_id");
  const Reader layout = r.object("layout");
  m.tensor = layout.i64("tensor");
  m.pipeline = layout.i64("pipeline");
  m.data = layout.i64("data");
  m.zero_stage = static_cast<int>(layout.i64("zero_stage"));
  m.micro_batch_size = layout.i64("micro_batch_size");
  const Reader model = r.object("model");
  ManifestModel& g = m.model;
  g.num_layers = model.i64("num_layers");
  g.hidden_size = model.i64("hidden_size");
  g.num_attention_heads = model.i64("num_attention_heads");
  g.ffn_hidden_size = model.i64("ffn_hidden_size");
  g.seq_length = model.i64("seq_length");
  g.max_position_embeddings = model.i64("max_position_embeddings");
  g.vocab_size = model.i64("vocab_size");
  g.padded_vocab_size = model.i64("padded_vocab_size");
  const JsonValue& files = r.get("files", JsonValue::Kind::kArray);
  for (size_t i = 0; i < files.items.size(); ++i) {
    if (!files.items[i].is_object()) r.fail("files[" + std::to_string(i) + "] is not an object");
    const Reader f(files.items[i], "files[" + std::to_string(i) + "]", path);
    ManifestFile mf;
    mf.name = f.str("name");
    mf.bytes = f.i64("bytes");
    if (!parse_checksum_text(f.str("xxh3"), &mf.xxh3))
      r.fail("files[" + std::to_string(i) + "].xxh3 is not xxh3:<16 hex digits>");
    // A file of the checkpoint directory, or of its tokenizer/ folder: never a path out of it.
    std::string_view leaf = mf.name;
    if (leaf.rfind("tokenizer/", 0) == 0) leaf.remove_prefix(10);
    if (leaf.empty() || leaf.find('/') != std::string_view::npos || leaf[0] == '.')
      r.fail("files[" + std::to_string(i) + "].name '" + mf.name +
             "' is not a file name (nor tokenizer/ and one)");
    m.files.push_back(std::move(mf));
  }
  m.recipe_yaml = r.str("recipe");
  validate_manifest(m, path);
  return m;
}

CheckpointManifest read_manifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kManifestFile).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw not_found("the checkpoint has no " + std::string(kManifestFile) +
                        " (it was never committed, or it is not a checkpoint directory)",
                    path);
  return parse_manifest(read_input_file(path), path);
}

}  // namespace mtnlg
