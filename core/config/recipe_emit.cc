// recipe_to_yaml (every key, resolved, in schema order), the enum names, padded_vocab_size.
#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "core/config/recipe.h"

namespace mtnlg {
namespace {

// Shortest text that parses back to the same double; always reads as a float ("1.0", not "1").
std::string format_double(double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// A YAML double-quoted string, so paths with ':', '#' or spaces survive.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One "key: value" line at an indent; values come pre-formatted.
class Writer {
 public:
  void section(int indent, const char* key) { line(indent) << key << ":\n"; }
  void value(int indent, const char* key, const std::string& v) {
    line(indent) << key << ": " << v << "\n";
  }
  void value(int indent, const char* key, int64_t v) { value(indent, key, std::to_string(v)); }
  void value(int indent, const char* key, uint64_t v) { value(indent, key, std::to_string(v)); }
  void value(int indent, const char* key, int v) { value(indent, key, std::to_string(v)); }
  void value(int indent, const char* key, double v) { value(indent, key, format_double(v)); }
  void value(int indent, const char* key, bool v) { value(indent, key, v ? "true" : "false"); }
  void value(int indent, const char* key, const char* v) { value(indent, key, std::string(v)); }
  void path(int indent, const char* key, const std::string& v) { value(indent, key, quote(v)); }
  std::ostringstream& line(int indent) {
    os_ << std::string(static_cast<size_t>(indent) * 2, ' ');
    return os_;
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

}  // namespace

int64_t Recipe::padded_vocab_size() const {
  const int64_t multiple = model.make_vocab_size_divisible_by * parallel.tensor;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFP32:
      return "fp32";
    case Precision::kBF16:
      return "bf16";
    case Precision::kFP16:
      return "fp16";
    case Precision::kFP8:
      return "fp8";
  }
  return "?";
}

const char* attention_backend_name(AttentionBackend a) {
  switch (a) {
    case AttentionBackend::kAuto:
      return "auto";
    case AttentionBackend::kCudnn:
      return "cudnn";
    case AttentionBackend::kFlash2:
      return "flash2";
    case AttentionBackend::kBlocked:
      return "blocked";
  }
  return "?";
}

const char* cpu_transport_name(CpuTransport t) {
  switch (t) {
    case CpuTransport::kAuto:
      return "auto";
    case CpuTransport::kShm:
      return "shm";
    case CpuTransport::kTcp:
      return "tcp";
    case CpuTransport::kGloo:
      return "gloo";
  }
  return "?";
}

const char* device_choice_name(DeviceChoice d) {
  switch (d) {
    case DeviceChoice::kAuto:
      return "auto";
    case DeviceChoice::kCpu:
      return "cpu";
    case DeviceChoice::kCuda:
      return "cuda";
  }
  return "?";
}

DType precision_dtype(Precision p) {
  switch (p) {
    case Precision::kBF16:
    case Precision::kFP8:  // everything but the linear layers' GEMMs
      return DType::kBF16;
    case Precision::kFP16:
      return DType::kF16;
    default:
      return DType::kF32;
  }
}

const char* decay_style_name(DecayStyle d) {
  switch (d) {
    case DecayStyle::kCosine:
      return "cosine";
    case DecayStyle::kLinear:
      return "linear";
    case DecayStyle::kConstant:
      return "constant";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
  }
  return "?";
}

std::string recipe_to_yaml(const Recipe& r) {
  Writer w;
  const ModelConfig& m = r.model;
  w.section(0, "model");
  w.value(1, "num_layers", m.num_layers);
  w.value(1, "hidden_size", m.hidden_size);
  w.value(1, "num_attention_heads", m.num_attention_heads);
  w.value(1, "ffn_hidden_size", m.ffn_hidden_size);
  w.value(1, "seq_length", m.seq_length);
  w.value(1, "max_position_embeddings", m.max_position_embeddings);
  w.value(1, "vocab_size", m.vocab_size);
  w.value(1, "make_vocab_size_divisible_by", m.make_vocab_size_divisible_by);
  w.value(1, "activation", activation_name(m.activation));
  w.value(1, "layernorm_epsilon", m.layernorm_epsilon);
  w.value(1, "init_method_std", m.init_method_std);
  w.value(1, "hidden_dropout", m.hidden_dropout);
  w.value(1, "attention_dropout", m.attention_dropout);
  w.value(1, "attention_backend", attention_backend_name(m.attention_backend));
  w.path(1, "init_from", m.init_from);

  const ParallelConfig& p = r.parallel;
  w.section(0, "parallel");
  w.value(1, "tensor", p.tensor);
  w.value(1, "pipeline", p.pipeline);
  w.value(1, "virtual_pipeline", p.virtual_pipeline);
  w.value(1, "data", p.data);
  w.value(1, "micro_batch_size", p.micro_batch_size);
  w.value(1, "zero_stage", p.zero_stage);
  w.value(1, "activation_checkpointing", p.activation_checkpointing);
  w.value(1, "sequence_parallel", p.sequence_parallel);
  w.value(1, "timeout_s", p.timeout_s);
  w.value(1, "overlap_grad_reduce", p.overlap_grad_reduce);
  w.value(1, "grad_bucket_mb", p.grad_bucket_mb);
  w.value(1, "grad_reduce_dtype", precision_name(p.grad_reduce_dtype));
  w.value(1, "transport", cpu_transport_name(p.transport));
  if (p.cuda_graph) w.value(1, "cuda_graph", p.cuda_graph);

  w.value(0, "precision", precision_name(r.precision));
  if (r.precision == Precision::kFP8) {
    w.section(0, "fp8");
    w.value(1, "format", r.fp8.hybrid ? "hybrid" : "e4m3");
    w.value(1, "scaling", r.fp8.scaling == Fp8ScalingMode::kDelayed ? "delayed" : "current");
    w.value(1, "amax_history_len", r.fp8.amax_history_len);
    w.value(1, "margin", int64_t{r.fp8.margin});
    w.value(1, "amax_compute_algo", r.fp8.amax_algo == Fp8AmaxAlgo::kMax ? "max" : "most_recent");
    w.value(1, "cache_weights", r.fp8.cache_weights);
  }
  w.value(0, "device", device_choice_name(r.device));

  const OptimizerConfig& o = r.optimizer;
  w.section(0, "optimizer");
  w.value(1, "lr", o.lr);
  w.value(1, "min_lr", o.min_lr);
  w.value(1, "betas", fmt::format("[{}, {}]", format_double(o.beta1), format_double(o.beta2)));
  w.value(1, "eps", o.eps);
  w.value(1, "weight_decay", o.weight_decay);
  w.value(1, "clip_grad", o.clip_grad);
  w.value(1, "loss_scale", o.loss_scale);
  w.value(1, "initial_loss_scale", o.initial_loss_scale);
  w.value(1, "loss_scale_window", o.loss_scale_window);
  w.value(1, "hysteresis", o.hysteresis);
  w.value(1, "min_loss_scale", o.min_loss_scale);

  const ScheduleConfig& s = r.schedule;
  w.section(0, "schedule");
  w.value(1, "warmup_tokens", s.warmup_tokens);
  w.value(1, "decay_tokens", s.decay_tokens);
  w.value(1, "decay_style", decay_style_name(s.decay_style));
  w.value(1, "train_tokens", s.train_tokens);
  w.value(1, "train_iters", s.train_iters);
  w.value(1, "exit_duration_minutes", s.exit_duration_minutes);

  w.section(0, "batch");
  w.value(1, "global_batch_size", r.batch.global_batch_size);
  w.section(1, "rampup");
  w.value(2, "start", r.batch.rampup.start);
  w.value(2, "increment", r.batch.rampup.increment);
  w.value(2, "tokens", r.batch.rampup.tokens);

  const DataConfig& d = r.data;
  w.section(0, "data");
  if (d.blend.empty()) {
    w.value(1, "blend", "[]");
  } else {
    w.section(1, "blend");
    for (const BlendEntry& e : d.blend) {
      w.line(2) << "- prefix: " << quote(e.prefix) << "\n";
      w.value(3, "weight", e.weight);
    }
  }
  std::string split;
  for (const double v : d.split) split += (split.empty() ? "" : ", ") + format_double(v);
  w.value(1, "split", "[" + split + "]");
  w.value(1, "seed", d.seed);
  w.value(1, "shuffle", d.shuffle);
  w.path(1, "cache_dir", d.cache_dir);

  const CheckpointConfig& c = r.checkpoint;
  w.section(0, "checkpoint");
  w.path(1, "dir", c.dir);
  w.value(1, "save_interval", c.save_interval);
  w.value(1, "keep_last", c.keep_last);
  w.value(1, "async", c.async);
  w.value(1, "resume", c.resume);
  w.path(1, "load", c.load);
  w.value(1, "load_optimizer", c.load_optimizer);
  if (c.load_iteration >= 0) w.value(1, "load_iteration", c.load_iteration);

  w.section(0, "logging");
  w.value(1, "interval", r.logging.interval);
  w.path(1, "metrics_file", r.logging.metrics_file);
  w.path(1, "tensorboard_dir", r.logging.tensorboard_dir);

  w.section(0, "eval");
  w.value(1, "interval", r.eval.interval);
  w.value(1, "iters", r.eval.iters);
  std::string tasks;
  for (const std::string& t : r.eval.tasks) {
    if (!tasks.empty()) tasks += ", ";
    tasks += quote(t);
  }
  w.value(1, "tasks", "[" + tasks + "]");
  w.value(1, "tasks_interval", r.eval.tasks_interval);
  w.path(1, "task_dir", r.eval.task_dir);
  w.value(1, "num_fewshot", r.eval.num_fewshot);
  w.value(1, "tasks_limit", r.eval.tasks_limit);
  w.path(1, "vocab_file", r.eval.vocab_file);
  w.path(1, "merge_file", r.eval.merge_file);

  w.section(0, "tokenizer");
  w.path(1, "vocab_file", r.tokenizer.vocab_file);
  w.path(1, "merge_file", r.tokenizer.merge_file);

  w.value(0, "seed", r.seed);
  return w.str();
}

}  // namespace mtnlg
