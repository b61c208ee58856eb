#include "checkpoint/offline.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_io.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_io.h"
#include "checkpoint/tokenizer_files.h"
#include "core/config/recipe.h"
#include "core/metrics.h"
#include "model/fp8_linear.h"
#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "optim/adamw.h"
#include "parallel/zero_partition.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

std::string human_bytes(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(b) / 1048576.0);
  return buf;
}

// The recipe the checkpoint was trained with, at another layout when overrides say so.
Recipe checkpoint_recipe(const CheckpointManifest& m, const std::string& dir,
                         const std::vector<std::string>& overrides = {}) {
  return parse_recipe(m.recipe_yaml, overrides, (fs::path(dir) / kManifestFile).string());
}

// The shards' tensors against the model the manifest describes (its recipe, at one rank): every
// parameter present with its global shape (the vocabulary padded as the manifest says), no
// parameter of another model, and the recipe's model the manifest's. Corruption naming the
// tensor otherwise: a shard written for another shape is caught before anything reads it.
void check_shards_match_manifest(const std::string& dir, const CheckpointManifest& m,
                                 ShardIndex& index) {
  const Recipe r = checkpoint_recipe(
      m, dir, {"parallel.tensor=1", "parallel.pipeline=1", "parallel.virtual_pipeline=1"});
  const std::string manifest = (fs::path(dir) / kManifestFile).string();
  const ModelConfig& rm = r.model;
  if (rm.num_layers != m.model.num_layers || rm.hidden_size != m.model.hidden_size ||
      rm.num_attention_heads != m.model.num_attention_heads ||
      rm.ffn_hidden_size != m.model.ffn_hidden_size || rm.vocab_size != m.model.vocab_size)
    throw corruption(
        "the manifest's model and its recipe disagree (layers, hidden, heads, ffn, vocab: " +
            std::to_string(m.model.num_layers) + ", " + std::to_string(m.model.hidden_size) + ", " +
            std::to_string(m.model.num_attention_heads) + ", " +
            std::to_string(m.model.ffn_hidden_size) + ", " + std::to_string(m.model.vocab_size) +
            " against " + std::to_string(rm.num_layers) + ", " + std::to_string(rm.hidden_size) +
            ", " + std::to_string(rm.num_attention_heads) + ", " +
            std::to_string(rm.ffn_hidden_size) + ", " + std::to_string(rm.vocab_size) +
            "); the checkpoint is damaged",
        manifest);
  const GPTConfig config = gpt_config_from(r);
  ParamRegistry reg;
  register_gpt_params(reg, config, full_model(config));
  std::set<std::string> expected;
  for (const Param& p : reg.params()) {
    const ParamSpec& spec = p.spec;
    expected.insert(spec.name);
    Shape want = spec.global_shape;
    if (spec.valid_rows > 0)
      want[0] = m.model.padded_vocab_size;  // padded at the saving tensor size
    const Shape got = index.global_shape(spec.name);
    if (got != want)
      throw corruption("tensor '" + spec.name + "' is " + shape_str(got) +
                           " in the shards but the manifest's model makes it " + shape_str(want) +
                           "; the checkpoint is damaged: load an earlier one",
                       manifest);
  }
  // precision: fp8's scaling state (model/fp8_linear.h) beside the parameters: the names its
  // recipe's layers make.
  if (r.precision == Precision::kFP8) {
    std::vector<int64_t> layers;
    for (int64_t i = 0; i < config.num_layers; ++i) layers.push_back(i);
    for (const auto& [name, bytes] : Fp8Linears(r.fp8, layers).save())
      expected.insert(Fp8Linears::kStatePrefix + name);
  }
  for (const std::string& n : index.names("model_"))
    if (!expected.count(n))
      throw corruption("the shards hold tensor '" + n +
                           "', which the manifest's model has not; "
                           "the checkpoint is damaged: load an earlier one",
                       manifest);
}

}  // namespace

std::string require_checkpoint(const std::string& path) {
  const std::optional<std::string> dir = find_checkpoint(path);
  if (!dir)
    throw not_found(
        "no committed checkpoint here; name a checkpoint root (checkpoint.dir) or one "
        "of its iter_NNNNNNN directories",
        path);
  return *dir;
}

std::string pin_checkpoint(const std::string& path, const std::string& note) {
  const std::string dir = require_checkpoint(path);
  write_file_atomic((std::filesystem::path(dir) / kPinFile).string(), note + "\n");
  return dir;
}

std::string unpin_checkpoint(const std::string& path) {
  const std::string dir = require_checkpoint(path);
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(dir) / kPinFile, ec);
  if (ec) throw io_error("cannot remove the pin: " + ec.message(), dir + "/" + kPinFile);
  return dir;
}

void inspect_checkpoint(const std::string& path, std::ostream& out) {
  const std::string dir = require_checkpoint(path);
  const CheckpointManifest m = read_manifest(dir);
  int64_t bytes = 0;
  for (const ManifestFile& f : m.files) bytes += f.bytes;
  out << "checkpoint      " << dir << "\n"
      << "format          " << m.format_version << "\n"
      << "iteration       " << m.iteration << "\n"
      << "consumed        " << m.consumed_samples << " samples, " << m.consumed_tokens
      << " tokens (valid: " << m.valid_consumed_samples << " samples)\n"
      << "layout          tensor " << m.tensor << " x pipeline " << m.pipeline << " x data "
      << m.data << (m.zero_stage ? ", ZeRO-1" : "") << ", micro-batch " << m.micro_batch_size
      << "\n"
      << "model           " << m.model.num_layers << " layers, hidden " << m.model.hidden_size
      << ", " << m.model.num_attention_heads << " heads, ffn " << m.model.ffn_hidden_size
      << ", seq " << m.model.seq_length << ", vocab " << m.model.vocab_size << " (padded "
      << m.model.padded_vocab_size << ")\n"
      << "optimizer       " << (m.has_optimizer ? "AdamW moments" : "none") << ", "
      << m.optimizer_steps << " steps, lr " << json_number(m.lr) << ", next global batch "
      << m.global_batch_size << "\n"
      << "rng             seed " << m.seed << ", data seed " << m.data_seed
      << ", next micro-batch id " << m.next_micro_batch_id << "\n"
      << "files           " << m.files.size() << ", " << human_bytes(bytes) << "\n";
  if (const std::optional<std::string> note = pin_note(dir))
    out << "pinned          " << (note->empty() ? std::string("yes") : *note) << "\n";
  for (const ManifestFile& f : m.files)
    out << "  " << f.name << "  " << f.bytes << " bytes  " << checksum_text(f.xxh3) << "\n";
  ShardIndex index(dir, m);
  check_shards_match_manifest(dir, m, index);
  const std::vector<std::string> names = index.names("model_");
  int64_t params = 0;
  out << "tensors         " << names.size() << " parameters\n";
  for (const std::string& n : names) {
    const Shape s = index.global_shape(n);
    params += shape_numel(s);
    out << "  " << n << "  " << shape_str(s) << "\n";
  }
  out << "parameters      " << params << " (the tied LM head is the word embedding)\n";
}

void verify_checkpoint(const std::string& path, std::ostream& out) {
  const std::string dir = require_checkpoint(path);
  const CheckpointManifest m = read_manifest(dir);
  ShardIndex index(dir, m);
  index.verify_all();
  verify_other_files(dir, m);
  check_shards_match_manifest(dir, m, index);
  for (const ManifestFile& f : m.files)
    out << "ok  " << f.name << "  " << f.bytes << " bytes  " << checksum_text(f.xxh3) << "\n";
  out << "checkpoint " << dir << " (iteration " << m.iteration << "): " << m.files.size()
      << " files, every size and checksum as recorded\n";
}

GatheredModel load_checkpoint_model(const std::string& path, Backend& backend,
                                    const std::vector<std::string>& overrides) {
  return load_checkpoint_stage(path, backend, StageLayout{}, DType::kF32, overrides);
}

Recipe read_checkpoint_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string dir = require_checkpoint(path);
  return checkpoint_recipe(read_manifest(dir), dir, overrides);
}

GatheredModel load_checkpoint_stage(const std::string& path, Backend& backend,
                                    const StageLayout& layout, DType dtype,
                                    const std::vector<std::string>& overrides) {
  const std::string dir = require_checkpoint(path);
  const CheckpointManifest m = read_manifest(dir);
  // One chunk a stage (a checkpoint saved interleaved is named globally).
  std::vector<std::string> all = {"parallel.tensor=" + std::to_string(layout.tensor),
                                  "parallel.pipeline=" + std::to_string(layout.pipeline),
                                  "parallel.virtual_pipeline=1",
                                  "parallel.sequence_parallel=false"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  GatheredModel out{checkpoint_recipe(m, dir, all), {}};
  GPTConfig config = gpt_config_from(out.recipe);
  config.tp_rank = layout.tensor_rank;
  // The tools score, generate and export in the dtype they are asked for: an fp8 run's weights
  // are bf16 values, and its FP8 casts a training-time choice whose scales these tools do not
  // load (a trainer's own evaluation casts with its live scales).
  config.fp8 = false;
  out.model =
      std::make_unique<GPTStage>(config, pipeline_stage(config, layout.pipeline, layout.stage),
                                 backend, dtype, out.recipe.seed, layout.tensor_group);
  ShardIndex index(dir, m);
  load_state(index, out.model->params().state(), backend);
  return out;
}

std::string hf_gpt2_config_json(const Recipe& r) {
  const std::string act = r.model.activation == Activation::kGelu ? "gelu" : "gelu_new";
  JsonLine cfg;
  cfg.add("model_type", "gpt2")
      .add("vocab_size", r.model.vocab_size)
      .add("n_positions", r.model.max_position_embeddings)
      .add("n_ctx", r.model.max_position_embeddings)
      .add("n_embd", r.model.hidden_size)
      .add("n_layer", r.model.num_layers)
      .add("n_head", r.model.num_attention_heads)
      .add("n_inner", r.model.ffn_hidden_size)
      .add("activation_function", act)
      .add("layer_norm_epsilon", r.model.layernorm_epsilon)
      .add("initializer_range", r.model.init_method_std)
      .add("resid_pdrop", r.model.hidden_dropout)
      .add("embd_pdrop", r.model.hidden_dropout)
      .add("attn_pdrop", r.model.attention_dropout)
      // GPT-2's end-of-text is its last token.
      .add("bos_token_id", r.model.vocab_size - 1)
      .add("eos_token_id", r.model.vocab_size - 1);
  std::string text = cfg.str();
  // Fields JsonLine has no type for.
  text.insert(text.size() - 1,
              ", \"architectures\": [\"GPT2LMHeadModel\"], "
              "\"tie_word_embeddings\": true");
  return text + "\n";
}

bool export_checkpoint_hf_gpt2(const std::string& path, const std::string& output,
                               const std::optional<TokenizerFiles>& tokenizer) {
  const std::optional<TokenizerFiles> tok =
      tokenizer ? tokenizer : checkpoint_tokenizer(require_checkpoint(path));
  const std::unique_ptr<Backend> backend = make_cpu_backend(0);
  const GatheredModel g = load_checkpoint_model(path, *backend);
  const Recipe& r = g.recipe;
  GPTStage& model = *g.model;
  std::error_code ec;
  const fs::path parent = fs::path(output).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw io_error("cannot create the output directory: " + ec.message(), parent.string());
  SafetensorsWriter w(output);
  w.add_metadata("format", "pt");
  export_hf_gpt2(model, false, w);
  w.commit();
  const fs::path config_path = fs::path(output).parent_path() / "config.json";
  write_file_atomic(config_path.string(), hf_gpt2_config_json(r));
  if (tok) {
    const fs::path dir = parent.empty() ? fs::path(".") : parent;
    write_tokenizer_files(dir.string(), dir.string(), *tok, r.model.max_position_embeddings);
  }
  return tok.has_value();
}

void convert_checkpoint(const std::string& path, const std::string& out_root, int64_t tensor,
                        int64_t pipeline, int64_t data, int zero_stage, bool force,
                        ProgressMode progress) {
  const std::string dir = require_checkpoint(path);
  const CheckpointManifest src = read_manifest(dir);
  if (zero_stage < 0) zero_stage = src.zero_stage;
  // The recipe checks the layout: heads and the padded vocabulary divide by tensor, layers by
  // pipeline, the batch by micro x data. Interleaving is a schedule, not part of the checkpoint
  // (parameters are named globally): the converted recipe has it off (virtual_pipeline 1), and a
  // resumed run sets it as it likes.
  const Recipe r = checkpoint_recipe(
      src, dir,
      {"parallel.tensor=" + std::to_string(tensor), "parallel.pipeline=" + std::to_string(pipeline),
       "parallel.data=" + std::to_string(data), "parallel.zero_stage=" + std::to_string(zero_stage),
       "parallel.virtual_pipeline=1"});
  std::error_code ec;
  if (fs::exists(out_root, ec) && fs::equivalent(out_root, fs::path(dir).parent_path(), ec))
    throw invalid_argument(
        "--output is the checkpoint's own root; write the converted "
        "checkpoint to another directory",
        out_root);
  if (!force && fs::is_directory(out_root, ec) && !fs::is_empty(out_root, ec))
    throw invalid_argument(
        "--output " + out_root +
            " is not empty (another run's checkpoints would be replaced and its latest moved); "
            "the fix: an empty or new directory, or --force to write into it",
        "--output");
  prepare_root(out_root);
  const std::string tmp = temp_dir_path(out_root, src.iteration);
  fs::create_directories(tmp, ec);
  if (ec) throw io_error("cannot create: " + ec.message(), tmp);
  ShardIndex index(dir, src);
  const std::unique_ptr<Backend> backend = make_cpu_backend(0);
  CheckpointManifest out = src;
  out.files.clear();
  out.tensor = tensor;
  out.pipeline = pipeline;
  out.data = data;
  out.zero_stage = zero_stage;
  out.model.padded_vocab_size = r.padded_vocab_size();
  out.recipe_yaml = recipe_to_yaml(r);
  // A model file per (tensor, pipeline) rank, and its optimizer's: one, or one per data rank
  // under ZeRO-1.
  const int64_t optim_files = !src.has_optimizer ? 0 : zero_stage == 1 && data > 1 ? data : 1;
  Progress shown(progress, "convert", "shard files", tensor * pipeline * (1 + optim_files));
  int64_t written = 0;
  const auto write = [&](const std::string& name, const std::vector<StateTensor>& state,
                         const ShardCoords& c) {
    const FileDigest d = write_shard_file((fs::path(tmp) / name).string(), state, c);
    out.files.push_back(ManifestFile{name, d.bytes, d.xxh3});
    shown.update(++written);
  };
  bool has_fp8_state = false;
  if (r.precision == Precision::kFP8)
    for (const std::string& n : index.names("model_"))
      has_fp8_state = has_fp8_state || n.starts_with(Fp8Linears::kStatePrefix);
  for (int64_t p = 0; p < pipeline; ++p) {
    for (int64_t t = 0; t < tensor; ++t) {
      GPTConfig config = gpt_config_from(r);
      config.tp_rank = t;
      ParamRegistry reg;
      register_gpt_params(reg, config, pipeline_stage(config, pipeline, p));
      reg.allocate(*backend, DType::kF32);
      std::vector<StateTensor> model = reg.state();
      load_state(index, model, *backend);
      if (has_fp8_state) {  // the stage's layers' FP8 scaling state, copied as saved
        const StageSpec st = pipeline_stage(config, pipeline, p);
        std::vector<int64_t> layers;
        for (int64_t c = 0; c < st.num_chunks; ++c)
          for (int64_t i = st.chunk_first(c); i < st.chunk_last(c); ++i) layers.push_back(i);
        for (StateTensor& s : Fp8Linears(r.fp8, layers).state_tensors()) {
          s.global_shape = s.shape = index.global_shape(s.name);
          s.flat_end = s.shape.at(0);
          s.tensor = Tensor::cpu(s.shape, DType::kF32);
          index.read(s, s.tensor);
          model.push_back(std::move(s));
        }
      }
      write(model_file_name(t, p), model, ShardCoords{t, p, 0});
      if (!src.has_optimizer) continue;
      if (zero_stage == 1 && data > 1) {
        std::vector<int64_t> numels;
        for (const Param& q : reg.params()) numels.push_back(q.value.numel());
        for (int64_t d = 0; d < data; ++d) {
          std::vector<StateTensor> state;
          for (const ZeroSegment& z : zero_partition(numels, data, d).segments) {
            const ParamSpec& spec = reg.params()[z.param].spec;
            for (const std::string& name : {exp_avg_name(spec.name), exp_avg_sq_name(spec.name)}) {
              StateTensor s = shard_state(spec, name, Tensor::cpu({z.length}, DType::kF32));
              s.flat_begin = z.in_param;
              s.flat_end = z.in_param + z.length;
              state.push_back(std::move(s));
            }
          }
          load_state(index, state, *backend);
          write(optim_file_name(t, p, d), state, ShardCoords{t, p, d});
        }
      } else {
        std::vector<StateTensor> state;
        for (const Param& q : reg.params())
          for (const std::string& name : {exp_avg_name(q.spec.name), exp_avg_sq_name(q.spec.name)})
            state.push_back(
                shard_state(q.spec, name, Tensor::cpu(q.spec.local_shape, DType::kF32)));
        load_state(index, state, *backend);
        write(optim_file_name(t, p, 0), state, ShardCoords{t, p, 0});
      }
    }
  }
  shown.finish();
  if (const std::optional<TokenizerFiles> tok = checkpoint_tokenizer(dir))
    for (ManifestFile& f : write_tokenizer_files((fs::path(tmp) / kTokenizerDir).string(), tmp,
                                                 *tok, src.model.seq_length))
      out.files.push_back(std::move(f));
  std::sort(out.files.begin(), out.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });
  write_file_atomic((fs::path(tmp) / kManifestFile).string(), manifest_to_json(out));
  commit_checkpoint(out_root, out.iteration);
}

ManifestModel manifest_model(const Recipe& r) {
  const GPTConfig c = gpt_config_from(r);
  return ManifestModel{c.num_layers, c.hidden,        c.heads, c.ffn,
                       c.seq,        c.max_positions, c.vocab, c.padded_vocab};
}

void write_whole_checkpoint(const std::string& root, CheckpointManifest m, const Recipe& recipe,
                            GPTStage& model, GPTStage* exp_avg, GPTStage* exp_avg_sq,
                            const std::optional<TokenizerFiles>& tokenizer) {
  MTNLG_CHECK_MSG((exp_avg == nullptr) == (exp_avg_sq == nullptr),
                  "write_whole_checkpoint: both of Adam's moments or neither");
  const Recipe whole = parse_recipe(recipe_to_yaml(recipe),
                                    {"parallel.tensor=1", "parallel.pipeline=1", "parallel.data=1",
                                     "parallel.zero_stage=0", "parallel.virtual_pipeline=1"},
                                    "the imported checkpoint's recipe");
  prepare_root(root);
  const std::string tmp = temp_dir_path(root, m.iteration);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) throw io_error("cannot create: " + ec.message(), tmp);
  m.files.clear();
  m.tensor = m.pipeline = m.data = 1;
  m.zero_stage = 0;
  m.micro_batch_size = whole.parallel.micro_batch_size;
  m.model = manifest_model(whole);
  m.recipe_yaml = recipe_to_yaml(whole);
  m.has_optimizer = exp_avg != nullptr;
  const auto write = [&](const std::string& name, const std::vector<StateTensor>& state) {
    const FileDigest d = write_shard_file((fs::path(tmp) / name).string(), state, ShardCoords{});
    m.files.push_back(ManifestFile{name, d.bytes, d.xxh3});
  };
  write(model_file_name(0, 0), model.params().state());
  if (exp_avg != nullptr) {
    std::vector<StateTensor> state;
    const auto& avg = exp_avg->params().params();
    const auto& avg_sq = exp_avg_sq->params().params();
    MTNLG_CHECK(avg.size() == avg_sq.size());
    for (size_t i = 0; i < avg.size(); ++i) {
      state.push_back(shard_state(avg[i].spec, exp_avg_name(avg[i].spec.name), avg[i].value));
      state.push_back(
          shard_state(avg_sq[i].spec, exp_avg_sq_name(avg_sq[i].spec.name), avg_sq[i].value));
    }
    write(optim_file_name(0, 0, 0), state);
  }
  if (tokenizer)
    for (ManifestFile& f : write_tokenizer_files((fs::path(tmp) / kTokenizerDir).string(), tmp,
                                                 *tokenizer, whole.model.seq_length))
      m.files.push_back(std::move(f));
  std::sort(m.files.begin(), m.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });
  write_file_atomic((fs::path(tmp) / kManifestFile).string(), manifest_to_json(m));
  commit_checkpoint(root, m.iteration);
}

}  // namespace mtnlg
