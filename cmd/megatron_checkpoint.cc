#include "cmd/megatron_checkpoint.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_io.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/json_parse.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_io.h"
#include "cmd/megatron_args.h"
#include "core/config/recipe.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/status.h"
#include "model/gpt_config.h"
#include "model/gpt_stage.h"
#include "optim/adamw.h"
#include "optim/batch_ramp.h"

extern char** environ;

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

#ifndef MTNLG_SCRIPTS_DIR
#define MTNLG_SCRIPTS_DIR "scripts"
#endif

std::string script_path() {
  const char* env = std::getenv("MTNLG_SCRIPTS_DIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : MTNLG_SCRIPTS_DIR;
  const std::string path = (fs::path(dir) / "megatron_ckpt.py").string();
  if (!fs::exists(path))
    throw not_found(
        "scripts/megatron_ckpt.py is not there (it reads and writes Megatron's pickled "
        "checkpoints with Debian's PyTorch); the fix: set MTNLG_SCRIPTS_DIR to the scripts/ "
        "directory of this source tree",
        path);
  return path;
}

// Runs /usr/bin/python3 megatron_ckpt.py ARGS (its output on ours); its exit status 2 is an
// unsupported input, 4 a missing or unreadable one, anything else a failure.
void run_script(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3", script_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0)
    throw not_found("cannot run /usr/bin/python3 (apt-get install python3 python3-torch)",
                    "/usr/bin/python3");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw io_error("waiting for /usr/bin/python3 failed", "/usr/bin/python3");
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) return;
  const std::string what = "scripts/megatron_ckpt.py " + args.front() + " failed (exit " +
                           std::to_string(code) + "; its message is above)";
  if (code == 2) throw unsupported(what, args.size() > 1 ? args[1] : "");
  if (code == 4) throw not_found(what, args.size() > 1 ? args[1] : "");
  throw Error(Code::kInternal, what, "");
}

// A directory beside `output` for the intermediate files, removed when done (or failed).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& output) : path_(beside(output)) {
    std::error_code ec;
    fs::remove_all(path_, ec);
    fs::create_directories(path_, ec);
    if (ec) throw io_error("cannot create a scratch directory: " + ec.message(), path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  static std::string beside(const std::string& output) {
    std::string base = fs::path(output).lexically_normal().string();
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    if (base.empty() || base == ".") base = "megatron";
    return base + ".megatron-" + std::to_string(::getpid());
  }
  std::string path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw not_found("cannot open", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int64_t int_member(const JsonValue& v, const char* key, const std::string& path) {
  const JsonValue* m = v.find(key);
  int64_t out = 0;
  if (m == nullptr || !m->to_int64(&out)) throw corruption(std::string("no integer ") + key, path);
  return out;
}

// A model of `recipe`'s shape at tensor and pipeline 1 holding the tensors of a Hugging Face
// GPT-2-layout file (weights or a moment of each weight).
std::unique_ptr<GPTStage> whole_model(const Recipe& recipe, Backend& backend,
                                      const std::string& file) {
  const GPTConfig config = gpt_config_from(recipe);
  auto model =
      std::make_unique<GPTStage>(config, full_model(config), backend, DType::kF32, recipe.seed);
  load_hf_gpt2(*model, file);
  return model;
}

}  // namespace

std::string import_megatron_checkpoint(const MegatronImport& o) {
  std::error_code ec;
  if (!o.force && fs::is_directory(o.output, ec) && !fs::is_empty(o.output, ec))
    throw invalid_argument("--output " + o.output +
                               " is not empty (another run's checkpoints would be replaced and "
                               "its latest moved); the fix: an empty or new directory, or --force",
                           "--output");
  const ScratchDir scratch(o.output);
  const std::string hf = scratch / "hf";
  std::vector<std::string> args = {"read", o.source, hf};
  if (o.weights_only) args.push_back("--weights-only");
  run_script(args);
  const std::string info_path = (fs::path(hf) / "megatron.json").string();
  const JsonValue info = parse_json(read_text(info_path), info_path);
  std::vector<std::string> flags;
  if (const JsonValue* f = info.find("flags"); f != nullptr && f->is_array())
    for (const JsonValue& x : f->items) flags.push_back(x.text);

  const MegatronConversion c = convert_megatron_args(flags);
  if (!c.not_carried.empty() && !o.allow_dropped) {
    std::string list;
    for (const std::string& l : c.not_carried) list += (list.empty() ? " " : "; ") + l;
    throw unsupported("the Megatron run used flags a recipe cannot reproduce:" + list +
                          ". The fix: --allow-dropped to import it anyway (the weights are "
                          "checked against the recipe's model, tensor by tensor)",
                      "--allow-dropped");
  }
  for (const std::string& l : c.not_carried) spdlog::warn("not carried over: {}", l);
  const int64_t tensor = o.tensor > 0 ? o.tensor : int_member(info, "tensor", info_path);
  const int64_t pipeline = o.pipeline > 0 ? o.pipeline : int_member(info, "pipeline", info_path);
  std::vector<std::string> sets = c.overrides;
  // The vocabulary the checkpoint's embeddings hold (the flags name only a tokenizer type).
  sets.push_back("model.vocab_size=" + std::to_string(int_member(info, "vocab_size", info_path)));
  sets.push_back("checkpoint.dir=" + o.output);
  sets.insert(sets.end(), o.sets.begin(), o.sets.end());
  // Read whole (tensor, pipeline and data 1): the layout is the resharding's, checked there.
  for (const char* s : {"parallel.tensor=1", "parallel.pipeline=1", "parallel.data=1",
                        "parallel.virtual_pipeline=1", "parallel.zero_stage=0"})
    sets.push_back(s);
  const Recipe recipe = parse_recipe(
      "{}", sets,
      "the Megatron checkpoint's arguments (" + o.source + ", scripts/megatron_ckpt.py)");

  std::optional<TokenizerFiles> tok = o.tokenizer;
  if (!tok && !recipe.tokenizer.vocab_file.empty() && !recipe.tokenizer.merge_file.empty())
    tok = TokenizerFiles{recipe.tokenizer.vocab_file, recipe.tokenizer.merge_file};

  const std::unique_ptr<Backend> backend = make_cpu_backend(0);
  const std::unique_ptr<GPTStage> model =
      whole_model(recipe, *backend, (fs::path(hf) / "model.safetensors").string());
  const bool optim = info.find("has_optimizer") != nullptr && info.find("has_optimizer")->boolean;
  std::unique_ptr<GPTStage> avg, avg_sq;
  if (optim) {
    avg = whole_model(recipe, *backend, (fs::path(hf) / "exp_avg.safetensors").string());
    avg_sq = whole_model(recipe, *backend, (fs::path(hf) / "exp_avg_sq.safetensors").string());
  }
  CheckpointManifest m;
  m.iteration = int_member(info, "iteration", info_path);
  m.consumed_samples = int_member(info, "consumed_train_samples", info_path);
  m.consumed_tokens = m.consumed_samples * recipe.model.seq_length;
  m.valid_consumed_samples = int_member(info, "consumed_valid_samples", info_path);
  m.optimizer_steps = int_member(info, "optimizer_steps", info_path);
  if (const JsonValue* lr = info.find("lr"); lr != nullptr && lr->is_number())
    m.lr = std::stod(lr->text);
  m.global_batch_size =
      global_batch_by_samples(recipe.batch, recipe.model.seq_length)(m.consumed_samples);
  m.seed = recipe.seed;
  m.data_seed = recipe.data.seed;
  m.next_micro_batch_id = m.consumed_samples / recipe.parallel.micro_batch_size;
  const std::string whole = scratch / "whole";
  write_whole_checkpoint(whole, m, recipe, *model, avg.get(), avg_sq.get(), tok);
  convert_checkpoint(whole, o.output, tensor, pipeline, o.data, o.zero_stage, o.force);
  std::ostringstream out;
  out << "imported " << o.source << " as iteration " << m.iteration << " (" << m.consumed_samples
      << " samples consumed"
      << (optim ? ", Adam step " + std::to_string(m.optimizer_steps) : ", weights only")
      << (tok ? ", with the tokenizer" : "") << ") at tensor " << tensor << " x pipeline "
      << pipeline << " x data " << o.data << " under " << o.output;
  return out.str();
}

std::string export_megatron_checkpoint(const std::string& path, const std::string& output,
                                       int64_t tensor, int64_t pipeline, bool force,
                                       const std::string& transformer_impl) {
  std::error_code ec;
  if (!force && fs::is_directory(output, ec) && !fs::is_empty(output, ec))
    throw invalid_argument("--output " + output +
                               " is not empty (a Megatron checkpoint root's latest would be "
                               "moved); the fix: an empty or new directory, or --force",
                           "--output");
  const std::string dir = require_checkpoint(path);
  const CheckpointManifest m = read_manifest(dir);
  const std::unique_ptr<Backend> backend = make_cpu_backend(0);
  const GatheredModel g = load_checkpoint_model(dir, *backend);
  const Recipe& r = g.recipe;
  if (r.model.num_attention_heads % tensor != 0 || r.model.num_layers % pipeline != 0)
    throw invalid_argument(
        "--layout " + std::to_string(tensor) + "," + std::to_string(pipeline) +
            ": tensor must divide the " + std::to_string(r.model.num_attention_heads) +
            " heads and pipeline the " + std::to_string(r.model.num_layers) + " layers",
        "--layout");
  const ScratchDir scratch(output);
  const std::string hf = scratch / "hf";
  fs::create_directories(hf, ec);
  const auto write_hf = [&](GPTStage& model, const std::string& name) {
    SafetensorsWriter w((fs::path(hf) / name).string());
    w.add_metadata("format", "pt");
    export_hf_gpt2(model, false, w);
    w.commit();
  };
  write_hf(*g.model, "model.safetensors");
  if (m.has_optimizer) {
    // Each moment into a model of the same shape, read as the trainer reads it (any layout, ZeRO
    // partitions joined), then written in the weights' Hugging Face layout.
    ShardIndex index(dir, m);
    const GPTConfig config = gpt_config_from(r);
    for (const bool sq : {false, true}) {
      GPTStage moment(config, full_model(config), *backend, DType::kF32, r.seed);
      std::vector<StateTensor> state;
      for (const Param& q : moment.params().params())
        state.push_back(shard_state(
            q.spec, sq ? exp_avg_sq_name(q.spec.name) : exp_avg_name(q.spec.name), q.value));
      load_state(index, state, *backend);
      write_hf(moment, sq ? "exp_avg_sq.safetensors" : "exp_avg.safetensors");
    }
  }
  write_file_atomic((fs::path(hf) / "config.json").string(), hf_gpt2_config_json(r));
  const MegatronSchedule sched = megatron_schedule(r);
  write_file_atomic((fs::path(hf) / "megatron.json").string(),
                    JsonLine()
                        .add("iteration", m.iteration)
                        .add("consumed_train_samples", m.consumed_samples)
                        .add("consumed_valid_samples", m.valid_consumed_samples)
                        .add("optimizer_steps", m.optimizer_steps)
                        .add("lr", m.lr)
                        .add("weight_decay", r.optimizer.weight_decay)
                        .add("adam_beta1", r.optimizer.beta1)
                        .add("adam_beta2", r.optimizer.beta2)
                        .add("adam_eps", r.optimizer.eps)
                        .add("bf16", r.precision == Precision::kBF16)
                        .add("seq_length", r.model.seq_length)
                        .add("micro_batch_size", r.parallel.micro_batch_size)
                        .add("global_batch_size", m.global_batch_size)
                        .add("seed", static_cast<int64_t>(r.seed))
                        .add("max_lr", r.optimizer.lr)
                        .add("min_lr", r.optimizer.min_lr)
                        .add("lr_decay_style", decay_style_name(r.schedule.decay_style))
                        // Megatron's scheduler counts samples, ours tokens: as to-megatron
                        // gives the schedule, so that a run of its flags resumes from this.
                        .add("lr_warmup_samples", sched.warmup_samples)
                        .add("lr_decay_samples", sched.decay_samples)
                        .add("train_samples", sched.train_samples)
                        // fp16 iterations skipped on an overflow move neither schedule.
                        .add("skipped_samples", m.skipped_tokens / r.model.seq_length)
                        .str());
  run_script({"write", hf, output, "--tensor", std::to_string(tensor), "--pipeline",
              std::to_string(pipeline), "--transformer-impl", transformer_impl});

  // The Megatron command line that resumes from it (what to-megatron prints for the recipe at
  // this layout, saving to and loading from `output`), beside it: Megatron asserts the
  // scheduler's state equals its command line's, and this one gives that state.
  Recipe resume = r;
  resume.parallel.tensor = tensor;
  resume.parallel.pipeline = pipeline;
  resume.parallel.virtual_pipeline = 1;
  resume.parallel.zero_stage = 0;  // the state is the non-distributed optimizer's
  resume.checkpoint.dir = fs::absolute(output).lexically_normal().string();
  resume.checkpoint.resume = true;
  resume.checkpoint.load.clear();
  resume.checkpoint.load_iteration = -1;
  resume.checkpoint.load_optimizer = m.has_optimizer;
  MegatronCommand command = recipe_to_megatron_args(resume);
  command.flags.push_back({"--ckpt-format", "torch"});
  if (transformer_impl == "legacy")
    command.flags.push_back({"--use-legacy-models"});
  else
    command.flags.push_back({"--transformer-impl", transformer_impl});
  std::string args_text =
      "# pretrain_gpt.py's arguments that resume from this checkpoint (mtnlg-ckpt export "
      "--format megatron of " +
      dir + "; mtnlg-recipe to-megatron)\n";
  for (const std::string& l : command.not_expressible) {
    args_text += "# Megatron would run this differently: ";
    args_text += l;
    args_text += '\n';
  }
  for (const std::string& l : command.notes) {
    args_text += "# note: ";
    args_text += l;
    args_text += '\n';
  }
  args_text += megatron_args_text(command, "");
  const std::string args_file = (fs::path(output) / "megatron_args.txt").string();
  write_file_atomic(args_file, args_text);
  std::ostringstream out;
  out << "wrote iteration " << m.iteration << " of " << dir
      << " as a Megatron checkpoint at tensor " << tensor << " x pipeline " << pipeline << " under "
      << output << (m.has_optimizer ? ", with Adam's state" : ", weights only")
      << "; Megatron-LM loads it with --load " << output << " --ckpt-format torch "
      << (transformer_impl == "legacy" ? "--use-legacy-models"
                                       : "--transformer-impl " + transformer_impl)
      << " --tensor-model-parallel-size " << tensor << " --pipeline-model-parallel-size "
      << pipeline
      << (m.has_optimizer ? " (without --use-distributed-optimizer: the state is the "
                            "non-distributed optimizer's)"
                          : " --no-load-optim")
      << "; the whole command line: " << args_file;
  return out.str();
}

}  // namespace mtnlg
