#include "checkpoint/hf_import.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "checkpoint/json_parse.h"
#include "core/input_file.h"
#include "model/gpt_params.h"

namespace mtnlg {

namespace {

constexpr const char* kPrefix = "transformer.";

// How a tensor's HF layout relates to ours.
enum class Layout {
  kSame,       // identical
  kTranspose,  // Conv1D [in, out] -> Linear [out, in]
  kQkvWeight,  // Conv1D [h, 3h], columns q|k|v -> [3h, h], rows per head (q_j, k_j, v_j)
  kQkvBias,    // [3h], q|k|v -> per head
  kVocabRows,  // [V, h] -> [V_pad, h], padded rows zero
};

struct Mapping {
  std::string hf;
  std::string ours;
  Shape hf_shape;
  Layout layout;
};

std::vector<Mapping> gpt2_mappings(const GPTConfig& c) {
  const int64_t h = c.hidden, f = c.ffn;
  std::vector<Mapping> m;
  m.push_back({"wte.weight", "embedding.word_embeddings.weight", {c.vocab, h}, Layout::kVocabRows});
  m.push_back(
      {"wpe.weight", "embedding.position_embeddings.weight", {c.max_positions, h}, Layout::kSame});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    auto add = [&](const std::string& hf, const char* ours, Shape shape, Layout layout) {
      m.push_back({p + hf, layer_param(i, ours), std::move(shape), layout});
    };
    add("ln_1.weight", "input_layernorm.weight", {h}, Layout::kSame);
    add("ln_1.bias", "input_layernorm.bias", {h}, Layout::kSame);
    add("attn.c_attn.weight", "self_attention.query_key_value.weight", {h, 3 * h},
        Layout::kQkvWeight);
    add("attn.c_attn.bias", "self_attention.query_key_value.bias", {3 * h}, Layout::kQkvBias);
    add("attn.c_proj.weight", "self_attention.dense.weight", {h, h}, Layout::kTranspose);
    add("attn.c_proj.bias", "self_attention.dense.bias", {h}, Layout::kSame);
    add("ln_2.weight", "post_attention_layernorm.weight", {h}, Layout::kSame);
    add("ln_2.bias", "post_attention_layernorm.bias", {h}, Layout::kSame);
    add("mlp.c_fc.weight", "mlp.dense_h_to_4h.weight", {h, f}, Layout::kTranspose);
    add("mlp.c_fc.bias", "mlp.dense_h_to_4h.bias", {f}, Layout::kSame);
    add("mlp.c_proj.weight", "mlp.dense_4h_to_h.weight", {f, h}, Layout::kTranspose);
    add("mlp.c_proj.bias", "mlp.dense_4h_to_h.bias", {h}, Layout::kSame);
  }
  m.push_back({"ln_f.weight", "final_layernorm.weight", {h}, Layout::kSame});
  m.push_back({"ln_f.bias", "final_layernorm.bias", {h}, Layout::kSame});
  return m;
}

// Row of our fused QKV for HF column c (c = which * h + head * hd + d).
int64_t qkv_row(int64_t c, int64_t h, int64_t hd) {
  const int64_t which = c / h, head = (c % h) / hd, d = c % hd;
  return head * 3 * hd + which * hd + d;
}

// Our layout from HF's, both f64 host tensors (`ours` already has our shape, zero-filled).
void hf_to_ours(Tensor& ours, const Tensor& hf, Layout layout, const GPTConfig& c) {
  const double* src = hf.data_as<double>();
  double* dst = ours.data_as<double>();
  const int64_t h = c.hidden, hd = c.head_dim();
  switch (layout) {
    case Layout::kSame:
    case Layout::kVocabRows:  // the first V rows; the rest stay zero
      std::memcpy(dst, src, hf.nbytes());
      break;
    case Layout::kTranspose: {
      const int64_t in = hf.dim(0), out = hf.dim(1);
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) dst[o * in + i] = src[i * out + o];
      break;
    }
    case Layout::kQkvWeight:
      for (int64_t i = 0; i < h; ++i)
        for (int64_t col = 0; col < 3 * h; ++col)
          dst[qkv_row(col, h, hd) * h + i] = src[i * 3 * h + col];
      break;
    case Layout::kQkvBias:
      for (int64_t col = 0; col < 3 * h; ++col) dst[qkv_row(col, h, hd)] = src[col];
      break;
  }
}

// The inverse of hf_to_ours (`hf` has the HF shape).
void ours_to_hf(Tensor& hf, const Tensor& ours, Layout layout, const GPTConfig& c) {
  const double* src = ours.data_as<double>();
  double* dst = hf.data_as<double>();
  const int64_t h = c.hidden, hd = c.head_dim();
  switch (layout) {
    case Layout::kSame:
    case Layout::kVocabRows:
      std::memcpy(dst, src, hf.nbytes());
      break;
    case Layout::kTranspose: {
      const int64_t in = hf.dim(0), out = hf.dim(1);
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) dst[i * out + o] = src[o * in + i];
      break;
    }
    case Layout::kQkvWeight:
      for (int64_t i = 0; i < h; ++i)
        for (int64_t col = 0; col < 3 * h; ++col)
          dst[i * 3 * h + col] = src[qkv_row(col, h, hd) * h + i];
      break;
    case Layout::kQkvBias:
      for (int64_t col = 0; col < 3 * h; ++col) dst[col] = src[qkv_row(col, h, hd)];
      break;
  }
}

void check_unsharded(const Param& p) {
  if (p.spec.local_shape != p.spec.global_shape)
    throw unsupported("HF GPT-2 export of a tensor-parallel shard (" + p.spec.name + " local " +
                      shape_str(p.spec.local_shape) + " of " + shape_str(p.spec.global_shape) +
                      ") is not implemented; use tensor parallel size 1");
}

// Whether `name` is a buffer HF keeps in GPT-2 state dicts (the causal mask), not a parameter.
bool is_ignored_buffer(const std::string& name) {
  // h.{digits}.attn.bias or h.{digits}.attn.masked_bias
  if (name.rfind("h.", 0) != 0) return false;
  size_t i = 2;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 2) return false;
  const std::string rest = name.substr(i);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

void check_lm_head(const SafetensorsFile& file, const std::string& head, const std::string& wte) {
  const auto& he = file.entry(head);
  const auto& we = file.entry(wte);
  if (he.shape != we.shape)
    throw invalid_argument("tensor '" + head + "' has shape " + shape_str(he.shape) + " but '" +
                               wte + "' has " + shape_str(we.shape) +
                               ": the model ties its LM head to the word embeddings",
                           file.path());
  bool equal;
  if (he.dtype == we.dtype) {
    const auto a = file.raw(head), b = file.raw(wte);
    equal = std::memcmp(a.data(), b.data(), a.size()) == 0;
  } else {
    const Tensor a = file.read(head, DType::kF64), b = file.read(wte, DType::kF64);
    equal = std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
  }
  if (!equal)
    throw invalid_argument("tensor '" + head + "' differs from '" + wte +
                               "': the model ties its LM head to the word embeddings, so an "
                               "untied head cannot be loaded",
                           file.path());
}

}  // namespace

GPTConfig hf_gpt2_config(const std::string& config_json) {
  const std::string text =
      read_input_file(config_json,
                      "the fix: put the model's config.json beside the weights, or name it with "
                      "--hf-config");
  const JsonValue root = parse_json(text, config_json);
  auto field = [&](const char* name, bool required) -> const JsonValue* {
    const JsonValue* v = root.is_object() ? root.find(name) : nullptr;
    if (v == nullptr && required)
      throw invalid_argument(std::string("config.json has no ") + name, config_json);
    return v;
  };
  auto integer = [&](const char* name) {
    int64_t x = 0;
    if (!field(name, true)->to_int64(&x) || x <= 0)
      throw invalid_argument(std::string(name) + " must be a positive integer", config_json);
    return x;
  };
  GPTConfig c;
  c.num_layers = integer("n_layer");
  c.hidden = integer("n_embd");
  c.heads = integer("n_head");
  const JsonValue* inner = field("n_inner", false);
  c.ffn = inner != nullptr && inner->is_number() ? integer("n_inner") : 4 * c.hidden;
  c.max_positions = integer("n_positions");
  c.seq = c.max_positions;
  c.vocab = integer("vocab_size");
  c.padded_vocab = (c.vocab + 127) / 128 * 128;
  if (c.hidden % c.heads != 0) throw invalid_argument("n_embd must divide by n_head", config_json);
  if (const JsonValue* act = field("activation_function", false)) {
    if (act->text == "gelu") {
      c.activation = Activation::kGelu;
    } else if (act->text == "gelu_new" || act->text == "gelu_pytorch_tanh" ||
               act->text == "gelu_fast") {
      c.activation = Activation::kGeluTanh;
    } else {
      throw invalid_argument(
          "activation_function \"" + act->text + "\" is not a GeLU this model has (gelu, gelu_new)",
          config_json);
    }
  } else {
    c.activation = Activation::kGeluTanh;  // GPT2Config's default, gelu_new
  }
  if (const JsonValue* eps = field("layer_norm_epsilon", false)) c.ln_eps = std::stod(eps->text);
  // The recipe's model checks and bounds, before anything is sized by these numbers; an error
  // names the config.json field it came from.
  ModelConfig m;
  m.num_layers = c.num_layers;
  m.hidden_size = c.hidden;
  m.num_attention_heads = c.heads;
  m.ffn_hidden_size = c.ffn;
  m.seq_length = c.seq;
  m.max_position_embeddings = c.max_positions;
  m.vocab_size = c.vocab;
  m.layernorm_epsilon = c.ln_eps;
  try {
    validate_model_config(m);
  } catch (const Error& e) {
    static const std::pair<const char*, const char*> names[] = {
        {"model.num_layers", "n_layer"},         {"model.hidden_size", "n_embd"},
        {"model.num_attention_heads", "n_head"}, {"model.ffn_hidden_size", "n_inner"},
        {"model.seq_length", "n_positions"},     {"model.max_position_embeddings", "n_positions"},
        {"model.vocab_size", "vocab_size"},      {"model.layernorm_epsilon", "layer_norm_epsilon"}};
    std::string field_name = e.context();
    for (const auto& [key, name] : names)
      if (e.context() == key) field_name = name;
    throw Error(e.code(), field_name + " (as " + e.context() + "): " + e.message(), config_json);
  }
  return c;
}

void load_hf_gpt2(GPTStage& model, const std::string& path) {
  const GPTConfig& c = model.config();
  const SafetensorsFile file(path);

  // Names without the prefix -> names in the file.
  std::map<std::string, std::string> by_name;
  for (const auto& e : file.entries()) {
    std::string name = e.name;
    if (name.rfind(kPrefix, 0) == 0) name = name.substr(std::strlen(kPrefix));
    if (!by_name.emplace(name, e.name).second)
      throw invalid_argument(
          "tensor '" + name + "' appears twice (with and without the '" + kPrefix + "' prefix)",
          path);
  }

  const std::vector<Mapping> mappings = gpt2_mappings(c);
  std::set<std::string> known;
  for (const Mapping& m : mappings) known.insert(m.hf);
  for (const auto& [name, file_name] : by_name) {
    if (known.count(name) || name == "lm_head.weight" || is_ignored_buffer(name)) continue;
    throw invalid_argument("unexpected tensor '" + file_name +
                               "': not a parameter of a GPT-2 model with " +
                               std::to_string(c.num_layers) + " layers",
                           path);
  }

  // Validate every tensor of the whole model before changing any parameter.
  for (const Mapping& m : mappings) {
    const auto it = by_name.find(m.hf);
    if (it == by_name.end())
      throw not_found("missing tensor '" + m.hf + "' (the model has " +
                          std::to_string(c.num_layers) + " layers)",
                      path);
    const SafetensorsEntry& entry = file.entry(it->second);
    // Weights are floating point: an integer dtype here is a mislabelled or foreign tensor.
    const safetensors::DType dt = entry.dtype;
    if (dt != safetensors::DType::kF32 && dt != safetensors::DType::kF64 &&
        dt != safetensors::DType::kF16 && dt != safetensors::DType::kBF16)
      throw corruption("tensor '" + it->second + "' is " +
                           std::string(safetensors::dtype_info(dt).name) +
                           ": GPT-2 weights are F32, F16, BF16 or F64; the file is damaged or not "
                           "a GPT-2 checkpoint",
                       path);
    const Shape& got = entry.shape;
    if (got == m.hf_shape) {
      // NaN or infinity in a weight would surface as a diverged run blaming the learning rate.
      if (model.params().contains(m.ours)) {
        const Tensor t = file.read(it->second, DType::kF64);
        const double* v = t.data_as<double>();
        for (int64_t k = 0; k < t.numel(); ++k)
          if (!std::isfinite(v[k]))
            throw corruption("tensor '" + it->second + "' element " + std::to_string(k) + " is " +
                                 (std::isnan(v[k]) ? "NaN" : "infinite") +
                                 ": the weights are damaged; re-export or re-download the file",
                             path);
      }
      continue;
    }
    if (m.hf == "wpe.weight" && got.size() == 2 && got[1] == c.hidden)
      throw invalid_argument("tensor '" + it->second + "' has " + std::to_string(got[0]) +
                                 " rows but the model's max_position_embeddings is " +
                                 std::to_string(c.max_positions) + ": set " +
                                 "model.max_position_embeddings to " + std::to_string(got[0]) +
                                 " (1024 for the released GPT-2 files)",
                             path);
    if (m.hf == "wte.weight" && got.size() == 2 && got[1] == c.hidden)
      throw invalid_argument("tensor '" + it->second + "' has " + std::to_string(got[0]) +
                                 " rows but the model's vocab_size is " + std::to_string(c.vocab) +
                                 ": set model.vocab_size to " + std::to_string(got[0]),
                             path);
    throw invalid_argument("tensor '" + it->second + "' has shape " + shape_str(got) +
                               ", the model config needs " + shape_str(m.hf_shape),
                           path);
  }
  if (by_name.count("lm_head.weight"))
    check_lm_head(file, by_name.at("lm_head.weight"), by_name.at("wte.weight"));

  ParamRegistry& reg = model.params();
  for (const Mapping& m : mappings) {
    if (!reg.contains(m.ours)) continue;  // another pipeline stage's tensor
    Param& p = reg.get(m.ours);
    const Tensor hf = file.read(by_name.at(m.hf), DType::kF64);
    Tensor host = Tensor::cpu(p.spec.global_shape, DType::kF64);
    hf_to_ours(host, hf, m.layout, c);
    if (p.spec.local_shape != p.spec.global_shape) {
      // A tensor-parallel shard: this rank's block of the global tensor (the layout that
      // init_values uses, so import and random init shard alike).
      Tensor shard = Tensor::cpu(p.spec.local_shape, DType::kF64);
      const double* src = host.data_as<double>();
      double* dst = shard.data_as<double>();
      for (int64_t k = 0; k < shard.numel(); ++k) dst[k] = src[global_index(p.spec, k)];
      host = shard;
    }
    model.backend().copy(p.value, host);
  }
}

std::vector<HFTensor> to_hf_gpt2(GPTStage& model, bool grads) {
  const GPTConfig& c = model.config();
  std::vector<HFTensor> out;
  for (const Mapping& m : gpt2_mappings(c)) {
    if (!model.params().contains(m.ours)) continue;
    const Param& p = model.params().get(m.ours);
    check_unsharded(p);
    Tensor ours = Tensor::cpu(p.spec.global_shape, DType::kF64);
    model.backend().copy(ours, grads ? p.grad : p.value);
    Tensor hf = Tensor::cpu(m.hf_shape, DType::kF64);
    ours_to_hf(hf, ours, m.layout, c);
    if (model.dtype() == DType::kF32) {
      Tensor f = Tensor::cpu(m.hf_shape, DType::kF32);
      const double* s = hf.data_as<double>();
      float* d = f.data_as<float>();
      for (int64_t i = 0; i < hf.numel(); ++i) d[i] = static_cast<float>(s[i]);
      hf = f;
    } else if (model.dtype() != DType::kF64) {
      throw unsupported(std::string("HF GPT-2 export of a ") + dtype_name(model.dtype()) +
                        " model; use f32 or f64");
    }
    out.push_back({m.hf, hf});
  }
  return out;
}

void export_hf_gpt2(GPTStage& model, bool grads, SafetensorsWriter& out) {
  for (const HFTensor& t : to_hf_gpt2(model, grads)) out.add(t.name, t.tensor);
}

}  // namespace mtnlg
