#include "cmd/megatron_args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/status.h"
#include "core/suggest.h"
#include "optim/batch_ramp.h"

namespace mtnlg {

namespace {

// Flags whose value maps onto one recipe key unchanged, and whether to-megatron writes the flag
// straight from the key's value (the others it writes under conditions of its own: fp16's loss
// scaling, the schedule's counts, paths that may be unset; or never: Megatron-DeepSpeed's).
struct DirectKey {
  const char* key;
  bool to_megatron;
};
const std::map<std::string, DirectKey>& direct_keys() {
  static const std::map<std::string, DirectKey> m = {
      {"--num-layers", {"model.num_layers", true}},
      {"--hidden-size", {"model.hidden_size", true}},
      {"--ffn-hidden-size", {"model.ffn_hidden_size", true}},
      {"--num-attention-heads", {"model.num_attention_heads", true}},
      {"--seq-length", {"model.seq_length", true}},
      {"--max-position-embeddings", {"model.max_position_embeddings", true}},
      {"--make-vocab-size-divisible-by", {"model.make_vocab_size_divisible_by", true}},
      {"--init-method-std", {"model.init_method_std", true}},
      {"--hidden-dropout", {"model.hidden_dropout", true}},
      {"--attention-dropout", {"model.attention_dropout", true}},
      {"--layernorm-epsilon", {"model.layernorm_epsilon", true}},
      {"--tensor-model-parallel-size", {"parallel.tensor", true}},
      {"--pipeline-model-parallel-size", {"parallel.pipeline", true}},
      {"--micro-batch-size", {"parallel.micro_batch_size", true}},
      {"--global-batch-size", {"batch.global_batch_size", true}},
      {"--train-iters", {"schedule.train_iters", false}},
      {"--train-tokens", {"schedule.train_tokens", false}},
      {"--lr", {"optimizer.lr", true}},
      {"--min-lr", {"optimizer.min_lr", true}},
      {"--lr-decay-style", {"schedule.decay_style", true}},
      {"--lr-warmup-tokens", {"schedule.warmup_tokens", false}},
      {"--lr-decay-tokens", {"schedule.decay_tokens", false}},
      {"--weight-decay", {"optimizer.weight_decay", true}},
      {"--clip-grad", {"optimizer.clip_grad", true}},
      {"--adam-eps", {"optimizer.eps", true}},
      {"--loss-scale", {"optimizer.loss_scale", false}},
      {"--initial-loss-scale", {"optimizer.initial_loss_scale", false}},
      {"--loss-scale-window", {"optimizer.loss_scale_window", false}},
      {"--hysteresis", {"optimizer.hysteresis", false}},
      {"--min-loss-scale", {"optimizer.min_loss_scale", false}},
      {"--data-cache-path", {"data.cache_dir", true}},
      {"--save-interval", {"checkpoint.save_interval", false}},
      {"--ckpt-step", {"checkpoint.load_iteration", false}},
      {"--vocab-file", {"tokenizer.vocab_file", false}},
      {"--merge-file", {"tokenizer.merge_file", false}},
      {"--log-interval", {"logging.interval", true}},
      {"--tensorboard-dir", {"logging.tensorboard_dir", false}},
      {"--eval-interval", {"eval.interval", false}},
      {"--eval-iters", {"eval.iters", false}},
      {"--exit-duration-in-mins", {"schedule.exit_duration_minutes", false}},
      {"--zero-stage", {"parallel.zero_stage", false}},
  };
  return m;
}

// Flags without a value that map onto recipe keys.
const std::map<std::string, std::vector<std::string>>& switch_keys() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"--bf16", {"precision=bf16"}},
      {"--fp16", {"precision=fp16"}},
      {"--use-distributed-optimizer", {"parallel.zero_stage=1"}},
      {"--recompute-activations", {"parallel.activation_checkpointing=true"}},
      {"--checkpoint-activations", {"parallel.activation_checkpointing=true"}},
      {"--no-load-optim", {"checkpoint.load_optimizer=false"}},
      {"--openai-gelu", {"model.activation=gelu_tanh"}},
      {"--no-bias-gelu-fusion", {"model.activation=gelu"}},
      {"--overlap-grad-reduce", {"parallel.overlap_grad_reduce=true"}},
      {"--sequence-parallel", {"parallel.sequence_parallel=true"}},
      {"--grad-reduce-in-bf16", {"parallel.grad_reduce_dtype=bf16"}},
      // Megatron-Core records the layers with Transformer Engine; ours the whole stage.
      {"--enable-cuda-graph", {"parallel.cuda_graph=true"}},
  };
  return m;
}

// Flags that change nothing here, and why (so they are not reported as lost).
const std::map<std::string, std::string>& no_effect() {
  static const std::map<std::string, std::string> m = {
      {"--distributed-backend", "NCCL on GPUs and Gloo on CPUs are chosen by the device"},
      {"--data-impl", "mmap is the only format read"},
      {"--DDP-impl", "gradients are bucketed and reduced by parallel/grad_sync.h"},
      {"--use-flash-attn", "the same attention math; the backend picks its kernel"},
      {"--no-masked-softmax-fusion", "the same softmax; kernel fusion is the backend's"},
      {"--no-gradient-accumulation-fusion", "the same sums; kernel fusion is the backend's"},
      {"--use-mcore-models", "one GPT implementation here"},
      {"--transformer-impl", "one GPT implementation here"},
      {"--use-legacy-models", "one GPT implementation here"},
      {"--ckpt-format", "checkpoints here are this project's (mtnlg-ckpt import reads Megatron's)"},
      {"--num-workers", "the loader prefetches in a thread of its own"},
  };
  return m;
}

// Every flag a Megatron-LM or Megatron-DeepSpeed parser has defined, with its parser group
// (scripts/megatron_flags.py writes the table).
const std::unordered_map<std::string_view, std::string_view>& megatron_flags() {
  static const std::unordered_map<std::string_view, std::string_view> m = {
#include "cmd/megatron_flags.inc"
  };
  return m;
}

// Flags that only log, profile or supervise a Megatron run: dropping them changes no number.
bool only_observes(const std::string& flag) {
  static const std::set<std::string_view> groups = {
      "logging",           "one_logger",     "straggler_detector",        "ft_package",
      "inprocess_restart", "fault_injector", "workload_inspector_server", "autoresume"};
  const auto it = megatron_flags().find(flag);
  if (it != megatron_flags().end() && groups.count(it->second)) return true;
  for (const char* word : {"tensorboard", "wandb", "timers", "timing", "profil", "-log-", "--log-",
                           "one-logger", "straggler"})
    if (flag.find(word) != std::string::npos) return true;
  return false;
}

int64_t to_int(const std::string& flag, const std::string& v) {
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size())
    throw invalid_argument(flag + " " + v + " is not an integer", flag);
  return x;
}

double to_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw invalid_argument(flag + " " + v + " is not a number", flag);
}

// "ckpt/x", "ckpt/x/" and "./ckpt/x" name one directory.
bool same_directory(const std::string& a, const std::string& b) {
  const auto norm = [](const std::string& p) {
    std::filesystem::path n = std::filesystem::path(p).lexically_normal();
    return n.has_filename() ? n : n.parent_path();
  };
  return norm(a) == norm(b);
}

bool is_flag(const std::string& s) {
  return s.size() > 2 && s[0] == '-' && s[1] == '-';
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Transformer Engine's flags (Megatron-LM's _add_transformer_engine_args, and the older
// --fp8-e4m3/--fp8-hybrid switches): FP8 training is on only with a format.
const std::set<std::string>& fp8_family() {
  static const std::set<std::string> m = {"--fp8-format",
                                          "--fp8-e4m3",
                                          "--fp8-hybrid",
                                          "--fp8-recipe",
                                          "--fp8-margin",
                                          "--fp8-interval",
                                          "--fp8-amax-history-len",
                                          "--fp8-amax-compute-algo",
                                          "--no-fp8-wgrad",
                                          "--fp8-param-gather",
                                          "--first-last-layers-bf16"};
  return m;
}

// precision: fp8 and its keys from Megatron's FP8 flags, with Megatron's defaults where they
// differ from the recipe's (Transformer Engine's): amax history 1, most_recent. `one` reads a
// flag's single value.
template <typename One>
void carry_fp8(const std::map<std::string, std::vector<std::string>>& given, const One& one,
               MegatronConversion& out) {
  const auto choice = [&](const std::string& flag, std::initializer_list<const char*> allowed) {
    const std::string v = *one(flag);
    std::string names;
    for (const char* a : allowed) {
      if (v == a) return v;
      names += (names.empty() ? "" : ", ") + std::string(a);
    }
    throw invalid_argument(flag + " " + v + " is not one of " + names, flag);
  };
  std::string format;
  if (given.count("--fp8-format")) format = choice("--fp8-format", {"e4m3", "hybrid"});
  for (const char* old : {"--fp8-e4m3", "--fp8-hybrid"})
    if (given.count(old)) {
      const std::string f = std::string(old).substr(6);
      if (!format.empty() && format != f)
        throw invalid_argument(std::string(old) + " with another FP8 format: keep one", old);
      format = f;
    }
  if (format.empty()) {
    for (const std::string& f : fp8_family())
      if (given.count(f))
        out.notes.push_back(f + ": no effect without --fp8-format (Megatron trains without FP8)");
    return;
  }
  auto& set = out.overrides;
  if (given.count("--fp16"))
    out.not_carried.push_back(
        "--fp16 with --fp8-format: precision: fp8 keeps bf16 outside the FP8 GEMMs here, without "
        "fp16's loss scaling (use --bf16)");
  set.push_back("precision=fp8");
  set.push_back("fp8.format=" + format);
  const std::string recipe =
      given.count("--fp8-recipe")
          ? choice("--fp8-recipe", {"delayed", "tensorwise", "mxfp8", "blockwise"})
          : "delayed";
  if (recipe == "delayed" || recipe == "tensorwise") {
    set.push_back(std::string("fp8.scaling=") + (recipe == "delayed" ? "delayed" : "current"));
  } else {
    out.not_carried.push_back("--fp8-recipe " + recipe +
                              ": per-block scaling is not built here (fp8.scaling: delayed or "
                              "current, one scale per tensor)");
  }
  if (recipe == "delayed") {
    const std::string history =
        given.count("--fp8-amax-history-len") ? *one("--fp8-amax-history-len") : "1";
    to_int("--fp8-amax-history-len", history);
    set.push_back("fp8.amax_history_len=" + history);
    set.push_back("fp8.amax_compute_algo=" +
                  (given.count("--fp8-amax-compute-algo")
                       ? choice("--fp8-amax-compute-algo", {"most_recent", "max"})
                       : std::string("most_recent")));
    if (!given.count("--fp8-amax-history-len") || !given.count("--fp8-amax-compute-algo"))
      out.notes.push_back(
          "fp8.amax_history_len, fp8.amax_compute_algo: Megatron's defaults (1, most_recent) "
          "where not given; a recipe without them takes Transformer Engine's (1024, max)");
    if (given.count("--fp8-margin"))
      set.push_back("fp8.margin=" + std::to_string(to_int("--fp8-margin", *one("--fp8-margin"))));
  } else {
    for (const char* f : {"--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-margin"})
      if (given.count(f))
        out.notes.push_back(std::string(f) + ": delayed scaling's; no effect with --fp8-recipe " +
                            recipe);
  }
  if (given.count("--fp8-interval"))
    out.notes.push_back(
        "--fp8-interval: Megatron-LM ignores it (deprecated); the scales "
        "update every step here");
  if (given.count("--no-fp8-wgrad"))
    out.not_carried.push_back(
        "--no-fp8-wgrad: the weight gradient GEMMs run in FP8 here, as Megatron's default");
  if (given.count("--fp8-param-gather"))
    out.not_carried.push_back(
        "--fp8-param-gather: the weights are kept in bf16 and cast at each use here");
  if (given.count("--first-last-layers-bf16"))
    out.not_carried.push_back(
        "--first-last-layers-bf16: every transformer layer's linear layers run in FP8 here");
}

}  // namespace

std::string megatron_flag_for(const std::string& recipe_key) {
  for (const auto& [flag, direct] : direct_keys())
    if (direct.key == recipe_key) return flag;
  if (recipe_key == "data.blend") return "--data-path";
  if (recipe_key == "checkpoint.dir") return "--save";
  if (recipe_key == "checkpoint.load") return "--load";
  if (recipe_key == "model.vocab_size") return "--tokenizer-type";
  return "";
}

MegatronConversion convert_megatron_args(const std::vector<std::string>& args) {
  // Group the command line into (flag, values): values run to the next --flag; --a=b is one.
  std::vector<std::pair<std::string, std::vector<std::string>>> flags;
  for (const std::string& a : args) {
    if (is_flag(a)) {
      const size_t eq = a.find('=');
      flags.push_back({a.substr(0, eq), {}});
      if (eq != std::string::npos) flags.back().second.push_back(a.substr(eq + 1));
    } else if (flags.empty()) {
      throw invalid_argument("'" + a +
                             "' comes before any --flag; give the arguments of "
                             "pretrain_gpt.py (the script name itself left out)");
    } else {
      flags.back().second.push_back(a);
    }
  }
  // A flag no Megatron parser ever defined fails as argparse fails it (a typo would otherwise
  // leave a setting at its default unseen).
  for (const auto& [f, v] : flags) {
    if (megatron_flags().count(f) || direct_keys().count(f) || switch_keys().count(f) ||
        no_effect().count(f))
      continue;
    std::vector<std::string_view> names;
    for (const auto& [name, group] : megatron_flags()) names.push_back(name);
    std::sort(names.begin(), names.end());  // the same suggestion whatever the hash order
    const std::string guess = suggest_name(f, names);
    throw invalid_argument(
        "unrecognized argument " + f +
            " (no Megatron-LM or Megatron-DeepSpeed "
            "version defines it" +
            (guess.empty() ? std::string(")") : "; did you mean " + guess + "?)"),
        f);
  }
  std::map<std::string, std::vector<std::string>> given;
  for (const auto& [f, v] : flags) given[f] = v;
  const auto one = [&](const std::string& f) -> std::optional<std::string> {
    const auto it = given.find(f);
    if (it == given.end()) return std::nullopt;
    if (it->second.size() != 1)
      throw invalid_argument(f + " takes one value, got " + std::to_string(it->second.size()), f);
    return it->second.front();
  };

  // The combinations Megatron's argument checks assert against: refused as Megatron refuses them
  // (a recipe would otherwise keep one of the two silently).
  const auto exclusive = [&](const char* a, const char* b, const char* why) {
    if (given.count(a) && given.count(b))
      throw invalid_argument(
          std::string(a) + " with " + b + ": " + why + " (Megatron refuses the pair too); keep one",
          b);
  };
  exclusive("--fp16", "--bf16", "one precision");
  exclusive("--train-iters", "--train-samples", "training is counted in iterations or samples");
  if (given.count("--train-iters")) {
    for (const char* f : {"--lr-decay-samples", "--lr-warmup-samples", "--rampup-batch-size"})
      exclusive("--train-iters", f, "iteration-based training takes iteration-based settings");
  }
  if (given.count("--train-samples")) {
    for (const char* f : {"--lr-decay-iters", "--lr-warmup-iters"})
      exclusive("--train-samples", f, "sample-based training takes sample-based settings");
  }
  for (const char* f : {"--lr-warmup-iters", "--lr-warmup-samples"})
    exclusive("--lr-warmup-fraction", f, "one way to give the warmup");

  MegatronConversion out;
  auto& set = out.overrides;
  // Megatron's defaults where ours differ.
  set.push_back("schedule.decay_style=linear");
  set.push_back("data.split=[969, 30, 1]");
  set.push_back("eval.interval=1000");
  set.push_back("eval.iters=100");
  set.push_back("logging.interval=100");
  set.push_back("model.vocab_size=50257");
  set.push_back("parallel.overlap_grad_reduce=false");
  // Megatron fuses the bias and GeLU by default (--bias-gelu-fusion), and its fused kernel is the
  // tanh approximation; --no-bias-gelu-fusion gives the exact erf GeLU.
  set.push_back("model.activation=gelu_tanh");

  const int64_t seq =
      given.count("--seq-length") ? to_int("--seq-length", *one("--seq-length")) : 0;
  const int64_t global = given.count("--global-batch-size")
                             ? to_int("--global-batch-size", *one("--global-batch-size"))
                             : 0;
  // Samples to tokens, and iterations to tokens (at the full batch).
  const auto samples_to_tokens = [&](const std::string& flag, const std::string& v) {
    if (seq <= 0) throw invalid_argument(flag + " needs --seq-length to become tokens", flag);
    return std::to_string(to_int(flag, v) * seq);
  };
  const auto iters_to_tokens = [&](const std::string& flag, const std::string& v) {
    if (seq <= 0 || global <= 0)
      throw invalid_argument(flag + " needs --seq-length and --global-batch-size to become tokens",
                             flag);
    if (given.count("--rampup-batch-size"))
      out.notes.push_back(flag + " " + v + " counted at the full global batch " +
                          std::to_string(global) +
                          " (Megatron counts iterations of the ramp's smaller batches): the "
                          "tokens here are an upper bound");
    return std::to_string(to_int(flag, v) * global * seq);
  };

  for (const auto& [flag, values] : flags) {
    const std::string v = values.empty() ? "" : values.front();
    std::string shown = flag;
    if (!values.empty()) {
      shown += ' ';
      shown += joined(values);
    }
    if (const auto it = direct_keys().find(flag); it != direct_keys().end()) {
      if (values.size() != 1)
        throw invalid_argument(flag + " takes one value, got " + std::to_string(values.size()),
                               flag);
      set.push_back(std::string(it->second.key) + "=" + v);
      continue;
    }
    if (const auto it = switch_keys().find(flag); it != switch_keys().end()) {
      set.insert(set.end(), it->second.begin(), it->second.end());
      continue;
    }
    if (flag == "--tokenizer-type") {
      if (v != "GPT2BPETokenizer")
        out.not_carried.push_back(shown +
                                  ": only GPT-2's BPE is supported (model.vocab_size "
                                  "50257 is assumed; set it for another vocabulary)");
    } else if (flag == "--train-samples") {
      set.push_back("schedule.train_tokens=" + samples_to_tokens(flag, v));
    } else if (flag == "--lr-warmup-samples") {
      set.push_back("schedule.warmup_tokens=" + samples_to_tokens(flag, v));
    } else if (flag == "--lr-decay-samples") {
      set.push_back("schedule.decay_tokens=" + samples_to_tokens(flag, v));
    } else if (flag == "--lr-warmup-iters") {
      set.push_back("schedule.warmup_tokens=" + iters_to_tokens(flag, v));
    } else if (flag == "--lr-decay-iters") {
      set.push_back("schedule.decay_tokens=" + iters_to_tokens(flag, v));
    } else if (flag == "--lr-warmup-fraction") {
      // Megatron: warmup steps = fraction x the decay's steps, the decay's steps being
      // --lr-decay-samples (else --train-samples) or --lr-decay-iters (else --train-iters)
      // times the global batch; here in tokens.
      const double fraction = to_double(flag, v);
      std::string base_flag;
      for (const char* f :
           {"--lr-decay-samples", "--lr-decay-iters", "--train-samples", "--train-iters"})
        if (given.count(f)) {
          base_flag = f;
          break;
        }
      if (base_flag.empty())
        throw invalid_argument(flag +
                                   " needs the decay's length: --lr-decay-samples, "
                                   "--lr-decay-iters, --train-samples or --train-iters",
                               flag);
      const bool samples = base_flag.find("samples") != std::string::npos;
      const std::string base = samples ? samples_to_tokens(base_flag, *one(base_flag))
                                       : iters_to_tokens(base_flag, *one(base_flag));
      const double tokens = fraction * static_cast<double>(std::stoll(base));
      const auto rounded = static_cast<int64_t>(std::llround(tokens));
      set.push_back("schedule.warmup_tokens=" + std::to_string(rounded));
      if (static_cast<double>(rounded) != tokens)
        out.notes.push_back(shown + ": " + std::to_string(rounded) + " warmup tokens (" + v +
                            " x the " + base + " tokens of " + base_flag + ", rounded)");
    } else if (flag == "--save") {
      set.push_back("checkpoint.dir=" + v);
    } else if (flag == "--load") {
      // Megatron's --save D --load D: continue from D's latest if it holds one, else start
      // fresh. That is checkpoint.resume; --load names another directory only when it differs.
      const std::optional<std::string> save = given.count("--save") ? one("--save") : std::nullopt;
      if (save) set.push_back("checkpoint.resume=true");
      if (!save || !same_directory(*save, v)) set.push_back("checkpoint.load=" + v);
    } else if (flag == "--rampup-batch-size") {
      if (values.size() != 3)
        throw invalid_argument("--rampup-batch-size takes start, increment and samples", flag);
      set.push_back("batch.rampup.start=" + values[0]);
      set.push_back("batch.rampup.increment=" + values[1]);
      set.push_back("batch.rampup.tokens=" + samples_to_tokens(flag, values[2]));
    } else if (flag == "--adam-beta1" || flag == "--adam-beta2") {
      // Both go into optimizer.betas below.
    } else if (flag == "--data-path") {
      std::string blend = "[";
      if (values.size() == 1) {
        blend += "{prefix: \"" + values[0] + "\", weight: 1}";
      } else if (values.size() % 2 == 0 && !values.empty()) {
        for (size_t i = 0; i < values.size(); i += 2) {
          to_double(flag, values[i]);  // a weight
          blend += std::string(i ? ", " : "") + "{prefix: \"" + values[i + 1] +
                   "\", weight: " + values[i] + "}";
        }
      } else {
        throw invalid_argument("--data-path takes one prefix or weight-prefix pairs, got " +
                                   std::to_string(values.size()) + " values",
                               flag);
      }
      set.push_back("data.blend=" + blend + "]");
    } else if (flag == "--split") {
      std::string split = v;
      for (char& c : split)
        if (c == '/') c = ',';
      set.push_back("data.split=[" + split + "]");
    } else if (flag == "--seed") {
      set.push_back("seed=" + v);
      set.push_back("data.seed=" + v);
    } else if (flag == "--attention-backend") {
      // Megatron-Core's AttnBackend: flash (FlashAttention), fused (cuDNN's, through Transformer
      // Engine), unfused and local (plain softmax(QK^T)V), auto.
      static const std::map<std::string, std::string> kernels = {{"auto", "auto"},
                                                                 {"flash", "flash2"},
                                                                 {"fused", "cudnn"},
                                                                 {"unfused", "blocked"},
                                                                 {"local", "blocked"}};
      const auto it = kernels.find(v);
      if (it == kernels.end())
        throw invalid_argument(flag + " " + v + " is not one of flash, fused, unfused, local, auto",
                               flag);
      set.push_back("model.attention_backend=" + it->second);
    } else if (flag == "--recompute-granularity") {
      if (v == "full") {
        set.push_back("parallel.activation_checkpointing=true");
      } else {
        out.not_carried.push_back(shown +
                                  ": only full recomputation exists here "
                                  "(parallel.activation_checkpointing)");
      }
    } else if (flag == "--recompute-method" || flag == "--recompute-num-layers") {
      // Full recomputation of every layer, one at a time (uniform, 1 layer a group) is
      // parallel.activation_checkpointing; other groupings recompute otherwise.
      const bool every_layer = flag == "--recompute-method" ? v == "uniform" : v == "1";
      if (!every_layer)
        out.not_carried.push_back(shown +
                                  ": every layer is recomputed, one at a time, with "
                                  "parallel.activation_checkpointing (--recompute-method uniform "
                                  "--recompute-num-layers 1)");
    } else if (flag == "--num-layers-per-virtual-pipeline-stage") {
      const int64_t layers =
          given.count("--num-layers") ? to_int("--num-layers", *one("--num-layers")) : 0;
      const int64_t pp =
          given.count("--pipeline-model-parallel-size")
              ? to_int("--pipeline-model-parallel-size", *one("--pipeline-model-parallel-size"))
              : 1;
      const int64_t per = to_int(flag, v);
      if (layers <= 0 || per <= 0 || layers % (pp * per) != 0)
        throw invalid_argument(flag + " " + v + " does not divide --num-layers / pipeline size",
                               flag);
      set.push_back("parallel.virtual_pipeline=" + std::to_string(layers / (pp * per)));
    } else if (fp8_family().count(flag)) {
      // Read together after the loop (carry_fp8): they mean something only with a format.
    } else if (const auto it = no_effect().find(flag); it != no_effect().end()) {
      out.notes.push_back(shown + ": " + it->second);
    } else if (only_observes(flag)) {
      out.notes.push_back(shown +
                          ": Megatron logs, profiles or supervises with it; nothing here "
                          "changes without it");
    } else {
      out.not_carried.push_back(shown + ": no recipe key does this");
    }
  }
  carry_fp8(given, one, out);
  if (given.count("--adam-beta1") || given.count("--adam-beta2")) {
    const std::string b1 = given.count("--adam-beta1") ? *one("--adam-beta1") : "0.9";
    const std::string b2 = given.count("--adam-beta2") ? *one("--adam-beta2") : "0.999";
    to_double("--adam-beta1", b1);
    to_double("--adam-beta2", b2);
    set.push_back("optimizer.betas=[" + b1 + ", " + b2 + "]");
  }
  // --eval-iters 0 builds no validation set in Megatron, so it never evaluates, whatever
  // --eval-interval says: the recipe's evaluation is off (eval.iters 0 alone is not a recipe).
  if (given.count("--eval-iters") && to_double("--eval-iters", *one("--eval-iters")) == 0) {
    std::erase_if(set, [](const std::string& s) { return s.rfind("eval.iters=", 0) == 0; });
    set.push_back("eval.interval=0");
  }
  // The metrics file lands with the run's other outputs: where --tensorboard-dir points, else in
  // the --save directory (not in whatever directory the job was started from).
  if (given.count("--tensorboard-dir"))
    set.push_back("logging.metrics_file=" + *one("--tensorboard-dir") + "/metrics.jsonl");
  else if (given.count("--save"))
    set.push_back("logging.metrics_file=" + *one("--save") + "/metrics.jsonl");
  return out;
}

namespace {

// A word as a POSIX shell reads it back: as is when it holds only safe characters, else in
// single quotes.
std::string shell_word(const std::string& w) {
  const bool safe = !w.empty() && w.find_first_not_of(
                                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQR"
                                      "STUVWXYZ0123456789-_./,:=+@%") == std::string::npos;
  if (safe) return w;
  std::string q = "'";
  for (const char c : w) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

// The node at a dotted key path ("model.num_layers"), undefined when absent.
YAML::Node yaml_at(const YAML::Node& node, std::string_view path) {
  const size_t dot = path.find('.');
  if (dot == std::string_view::npos) return node[std::string(path)];
  return yaml_at(node[std::string(path.substr(0, dot))], path.substr(dot + 1));
}

}  // namespace

std::string megatron_args_text(const MegatronCommand& c, const std::string& relative_to) {
  const std::string base =
      relative_to.empty() || relative_to.back() == '/' ? relative_to : relative_to + "/";
  std::string out;
  for (size_t i = 0; i < c.flags.size(); ++i) {
    std::string line;
    for (std::string w : c.flags[i]) {
      if (!base.empty() && w.rfind(base, 0) == 0 && w.size() > base.size())
        w = w.substr(base.size());
      if (!line.empty()) line += ' ';
      line += shell_word(w);
    }
    out += line;
    out += i + 1 < c.flags.size() ? " \\\n" : "\n";
  }
  return out;
}

MegatronSchedule megatron_schedule(const Recipe& r) {
  const int64_t seq = r.model.seq_length;
  const auto samples = [&](int64_t tokens) { return (tokens + seq / 2) / seq; };
  const ScheduleConfig& s = r.schedule;
  return {samples(s.warmup_tokens), samples(s.decay_tokens),
          s.train_iters == 0 ? samples(s.train_tokens) : run_length(r).tokens / seq};
}

MegatronCommand recipe_to_megatron_args(const Recipe& r) {
  MegatronCommand out;
  const auto add = [&](const char* flag, std::vector<std::string> values = {}) {
    values.insert(values.begin(), flag);
    out.flags.push_back(std::move(values));
  };
  // Shortest text that reads back as the same double (what YAML and argparse then parse).
  const auto num = [](double v) { return fmt::format("{}", v); };
  const auto count = [](int64_t v) { return std::to_string(v); };
  const ModelConfig& m = r.model;
  const int64_t seq = m.seq_length;
  // Tokens as Megatron's samples, rounded where a count is not whole samples.
  const auto samples = [&](const char* key, int64_t tokens) {
    const int64_t s = (tokens + seq / 2) / seq;
    if (s * seq != tokens)
      out.notes.push_back(
          fmt::format("{} {}: {} samples of {} tokens ({} tokens)", key, tokens, s, seq, s * seq));
    return s;
  };

  // The flags of one recipe key each, from the table from-megatron reads them with: the key's
  // value as the recipe's YAML writes it (which parses back to the same value).
  const YAML::Node yaml = YAML::Load(recipe_to_yaml(r));
  for (const auto& [flag, direct] : direct_keys()) {
    if (!direct.to_megatron) continue;
    const YAML::Node node = yaml_at(yaml, direct.key);
    if (!node.IsScalar())
      throw std::logic_error(std::string("to-megatron: the recipe's YAML has no ") + direct.key);
    add(flag.c_str(), {node.Scalar()});
  }
  // Megatron's default fused bias-GeLU is the tanh approximation; unfused, the exact GeLU.
  if (m.activation == Activation::kGelu) add("--no-bias-gelu-fusion");
  switch (m.attention_backend) {
    case AttentionBackend::kAuto:
      break;
    case AttentionBackend::kFlash2:
      add("--attention-backend", {"flash"});
      break;
    case AttentionBackend::kCudnn:
      add("--attention-backend", {"fused"});
      break;
    case AttentionBackend::kBlocked:
      add("--attention-backend", {"unfused"});
      break;
  }
  add("--tokenizer-type", {"GPT2BPETokenizer"});
  if (!r.tokenizer.vocab_file.empty()) add("--vocab-file", {r.tokenizer.vocab_file});
  if (!r.tokenizer.merge_file.empty()) add("--merge-file", {r.tokenizer.merge_file});
  if (r.tokenizer.vocab_file.empty() || r.tokenizer.merge_file.empty())
    out.notes.push_back(
        "tokenizer.vocab_file, tokenizer.merge_file: unset (this run looks in "
        "data/gpt2/); Megatron's GPT2BPETokenizer needs --vocab-file and "
        "--merge-file");
  if (m.vocab_size != 50257)
    out.not_expressible.push_back(fmt::format(
        "model.vocab_size {}: Megatron takes the vocabulary from its tokenizer (GPT-2's BPE: "
        "50257)",
        m.vocab_size));
  if (!m.init_from.empty())
    out.not_expressible.push_back("model.init_from " + m.init_from +
                                  ": Megatron starts from a --load checkpoint "
                                  "(scripts/hf_to_megatron.py writes one from this file)");

  const ParallelConfig& p = r.parallel;
  if (p.virtual_pipeline > 1)
    add("--num-layers-per-virtual-pipeline-stage",
        {count(m.num_layers / (p.pipeline * p.virtual_pipeline))});
  if (p.zero_stage == 1) add("--use-distributed-optimizer");
  if (p.activation_checkpointing) {
    add("--recompute-granularity", {"full"});
    add("--recompute-method", {"uniform"});
    add("--recompute-num-layers", {"1"});
  }
  if (p.sequence_parallel) add("--sequence-parallel");
  if (p.overlap_grad_reduce) add("--overlap-grad-reduce");
  if (p.cuda_graph) add("--enable-cuda-graph");
  if ((r.precision == Precision::kBF16 || r.precision == Precision::kFP8) &&
      p.grad_reduce_dtype == Precision::kBF16)
    add("--grad-reduce-in-bf16");
  if (p.data > 0)
    out.notes.push_back(
        fmt::format("parallel.data {}: Megatron takes the data-parallel size from "
                    "the world: launch {} ranks",
                    p.data, p.tensor * p.pipeline * p.data));
  if (p.transport != CpuTransport::kAuto)
    out.notes.push_back(fmt::format("parallel.transport {}: this run's CPU groups (Megatron: NCCL)",
                                    cpu_transport_name(p.transport)));

  if (r.precision == Precision::kBF16 || r.precision == Precision::kFP8) add("--bf16");
  if (r.precision == Precision::kFP8) {
    const Fp8Options& f = r.fp8;
    add("--fp8-format", {f.hybrid ? "hybrid" : "e4m3"});
    add("--fp8-recipe", {f.scaling == Fp8ScalingMode::kDelayed ? "delayed" : "tensorwise"});
    if (f.scaling == Fp8ScalingMode::kDelayed) {
      add("--fp8-amax-history-len", {count(f.amax_history_len)});
      add("--fp8-amax-compute-algo", {f.amax_algo == Fp8AmaxAlgo::kMax ? "max" : "most_recent"});
      if (f.margin > 0) add("--fp8-margin", {count(f.margin)});
      out.notes.push_back(
          "fp8.scaling delayed: this run updates the scales once a step (the step's amaxes "
          "over every micro-batch); Transformer Engine updates after each forward and backward");
    }
    if (!f.cache_weights)
      out.notes.push_back(
          "fp8.cache_weights false: Transformer Engine casts each weight on a step's first "
          "micro-batch only, with no flag to cast it at every use (the values are the same)");
    if (f.scaling != Fp8ScalingMode::kDelayed && f.margin > 0) {
      out.not_expressible.push_back(fmt::format(
          "fp8.margin {} with fp8.scaling current: Megatron's --fp8-margin applies to delayed "
          "scaling only",
          f.margin));
    }
  }
  if (r.precision == Precision::kFP16) {
    const OptimizerConfig& o = r.optimizer;
    add("--fp16");
    if (o.loss_scale > 0) add("--loss-scale", {num(o.loss_scale)});
    add("--initial-loss-scale", {num(o.initial_loss_scale)});
    add("--loss-scale-window", {count(o.loss_scale_window)});
    add("--hysteresis", {count(o.hysteresis)});
    add("--min-loss-scale", {num(o.min_loss_scale)});
  }
  const OptimizerConfig& o = r.optimizer;
  add("--adam-beta1", {num(o.beta1)});
  add("--adam-beta2", {num(o.beta2)});

  // The schedule: in iterations where every count is whole iterations of the full batch (no
  // ramp), else in samples.
  const ScheduleConfig& s = r.schedule;
  const BatchConfig& b = r.batch;
  const int64_t per_iteration = r.tokens_per_iteration();
  const bool ramp = b.rampup.start > 0;
  if (ramp)
    add("--rampup-batch-size", {count(b.rampup.start), count(b.rampup.increment),
                                count(samples("batch.rampup.tokens", b.rampup.tokens))});
  if (s.train_iters > 0 && !ramp && s.warmup_tokens % per_iteration == 0 &&
      s.decay_tokens % per_iteration == 0) {
    add("--train-iters", {count(s.train_iters)});
    if (s.warmup_tokens > 0) add("--lr-warmup-iters", {count(s.warmup_tokens / per_iteration)});
    if (s.decay_tokens != s.train_iters * per_iteration)
      add("--lr-decay-iters", {count(s.decay_tokens / per_iteration)});
  } else {
    // The samples the run trains on: train_tokens, or its iterations of the ramp's batches
    // (whichever ends it first when both are set).
    const int64_t train = s.train_iters == 0 ? samples("schedule.train_tokens", s.train_tokens)
                                             : megatron_schedule(r).train_samples;
    if (s.train_iters > 0 && s.train_tokens > 0)
      out.notes.push_back(fmt::format(
          "schedule.train_iters {} and schedule.train_tokens {}: Megatron takes one length, "
          "--train-samples {} (where this run ends)",
          s.train_iters, s.train_tokens, train));
    add("--train-samples", {count(train)});
    if (s.warmup_tokens > 0)
      add("--lr-warmup-samples", {count(samples("schedule.warmup_tokens", s.warmup_tokens))});
    if (s.decay_tokens != train * seq)
      add("--lr-decay-samples", {count(samples("schedule.decay_tokens", s.decay_tokens))});
  }
  if (s.exit_duration_minutes > 0) add("--exit-duration-in-mins", {num(s.exit_duration_minutes)});

  const DataConfig& d = r.data;
  std::vector<std::string> blend;
  for (const BlendEntry& e : d.blend) {
    blend.push_back(num(e.weight));
    blend.push_back(e.prefix);
  }
  if (!blend.empty()) add("--data-path", blend);
  std::string split;
  for (const double x : d.split) {
    if (!split.empty()) split += ',';
    split += num(x);
  }
  add("--split", {split});
  add("--seed", {count(static_cast<int64_t>(r.seed))});
  if (d.seed != r.seed)
    out.not_expressible.push_back(
        fmt::format("data.seed {}: Megatron shuffles the data with --seed ({})", d.seed, r.seed));
  if (!d.shuffle)
    out.not_expressible.push_back(
        "data.shuffle false: Megatron always shuffles its samples (GPTDataset)");

  const CheckpointConfig& c = r.checkpoint;
  if (!c.dir.empty()) {
    add("--save", {c.dir});
    if (c.save_interval > 0) add("--save-interval", {count(c.save_interval)});
  }
  // Megatron's --load continues from the directory's latest; --save D --load D is resume.
  if (!c.load.empty()) {
    add("--load", {c.load});
    if (!c.resume && !c.dir.empty())
      out.notes.push_back(
          "checkpoint.resume false with checkpoint.load: Megatron continues from "
          "--load's latest whatever --save holds");
  } else if (c.resume && !c.dir.empty()) {
    add("--load", {c.dir});
  }
  if (c.load_iteration >= 0) add("--ckpt-step", {count(c.load_iteration)});
  if (!c.load_optimizer) add("--no-load-optim");
  if (c.keep_last > 0 || c.async)
    out.notes.push_back(fmt::format(
        "checkpoint.keep_last {}, checkpoint.async {}: this run's checkpoint housekeeping",
        c.keep_last, c.async));

  if (!r.logging.tensorboard_dir.empty()) add("--tensorboard-dir", {r.logging.tensorboard_dir});
  if (r.eval.interval > 0) {
    add("--eval-interval", {count(r.eval.interval)});
    add("--eval-iters", {count(r.eval.iters)});
  } else {
    add("--eval-iters", {"0"});
  }
  if (!r.eval.tasks.empty())
    out.notes.push_back(
        "eval.tasks: lm-evaluation-harness tasks during training (Megatron has "
        "none; mtnlg-eval --tasks scores its checkpoints)");
  return out;
}

}  // namespace mtnlg
