#include "model/gpt_params.h"

#include <cmath>

namespace mtnlg {

GPTConfig gpt_config_from(const Recipe& r) {
  GPTConfig c;
  c.num_layers = r.model.num_layers;
  c.hidden = r.model.hidden_size;
  c.heads = r.model.num_attention_heads;
  c.ffn = r.model.ffn_hidden_size;
  c.seq = r.model.seq_length;
  c.max_positions = r.model.max_position_embeddings;
  c.vocab = r.model.vocab_size;
  c.padded_vocab = r.padded_vocab_size();
  c.activation = r.model.activation;
  c.ln_eps = r.model.layernorm_epsilon;
  c.init_std = r.model.init_method_std;
  c.hidden_dropout = r.model.hidden_dropout;
  c.attention_dropout = r.model.attention_dropout;
  c.activation_checkpointing = r.parallel.activation_checkpointing;
  c.tp_size = r.parallel.tensor;  // tp_rank is the caller's (the topology's)
  c.sequence_parallel = r.parallel.sequence_parallel && r.parallel.tensor > 1;
  c.fp8 = r.precision == Precision::kFP8;
  c.fp8_options = r.fp8;
  c.virtual_pipeline = r.parallel.pipeline > 1 ? r.parallel.virtual_pipeline : 1;
  return c;
}

StageSpec full_model(const GPTConfig& config) {
  return StageSpec{0, config.num_layers, true, true};
}

StageSpec pipeline_stage(const GPTConfig& config, int64_t pipeline, int64_t stage) {
  const int64_t v = pipeline > 1 ? config.virtual_pipeline : 1;
  MTNLG_CHECK(pipeline >= 1 && 0 <= stage && stage < pipeline && v >= 1 &&
              config.num_layers % (pipeline * v) == 0);
  const int64_t per_chunk = config.num_layers / (pipeline * v);
  return StageSpec{
      stage * per_chunk,   (stage + 1) * per_chunk, stage == 0, stage == pipeline - 1, v,
      pipeline * per_chunk};
}

std::string layer_param(int64_t layer, const std::string& suffix) {
  return "layers." + std::to_string(layer) + "." + suffix;
}

namespace {

// A parameter split along `dim` over the config's tensor-parallel ranks (-1: replicated).
ParamSpec spec(const GPTConfig& c, std::string name, Shape global, int dim, bool no_decay,
               double std, double value) {
  Shape local = global;
  if (dim >= 0) {
    MTNLG_CHECK_MSG(global[static_cast<size_t>(dim)] % c.tp_size == 0,
                    name << ": dim " << dim << " not divisible by tensor parallel " << c.tp_size);
    local[static_cast<size_t>(dim)] /= c.tp_size;
  }
  return ParamSpec{std::move(name), std::move(global),       std::move(local), dim, no_decay, std,
                   value,           dim >= 0 ? c.tp_rank : 0};
}

void add_layernorm(ParamRegistry& reg, const GPTConfig& c, const std::string& prefix) {
  reg.add(spec(c, prefix + ".weight", {c.hidden}, -1, true, 0.0, 1.0));
  reg.add(spec(c, prefix + ".bias", {c.hidden}, -1, true, 0.0, 0.0));
}

// A Linear's weight [out, in] and bias [out]; partition_dim 0 = column-parallel (bias split
// too), 1 = row-parallel (bias replicated, added after the reduction).
void add_linear(ParamRegistry& reg, const GPTConfig& c, const std::string& prefix, int64_t out,
                int64_t in, int partition_dim, double std) {
  reg.add(spec(c, prefix + ".weight", {out, in}, partition_dim, false, std, 0.0));
  reg.add(spec(c, prefix + ".bias", {out}, partition_dim == 0 ? 0 : -1, true, 0.0, 0.0));
}

}  // namespace

void register_gpt_params(ParamRegistry& reg, const GPTConfig& c, const StageSpec& stage) {
  MTNLG_CHECK(0 <= stage.first_layer && stage.first_layer <= stage.last_layer &&
              stage.num_chunks >= 1 && stage.chunk_last(stage.num_chunks - 1) <= c.num_layers);
  const double out_std = c.init_std / std::sqrt(2.0 * static_cast<double>(c.num_layers));
  // The last stage needs the word embeddings as its LM head even when it is not the first.
  if (stage.pre_process || stage.post_process) {
    ParamSpec words = spec(c, "embedding.word_embeddings.weight", {c.padded_vocab, c.hidden}, 0,
                           false, c.init_std, 0.0);
    words.valid_rows = c.vocab;  // the rest pads the vocabulary for tensor parallelism
    if (stage.pre_process != stage.post_process)
      words.tied = stage.pre_process ? Tied::kOwner : Tied::kCopy;
    reg.add(std::move(words));
  }
  if (stage.pre_process) {
    reg.add(spec(c, "embedding.position_embeddings.weight", {c.max_positions, c.hidden}, -1, false,
                 c.init_std, 0.0));
  }
  for (int64_t chunk = 0; chunk < stage.num_chunks; ++chunk)
    for (int64_t i = stage.chunk_first(chunk); i < stage.chunk_last(chunk); ++i) {
      add_layernorm(reg, c, layer_param(i, "input_layernorm"));
      add_linear(reg, c, layer_param(i, "self_attention.query_key_value"), 3 * c.hidden, c.hidden,
                 0, c.init_std);
      add_linear(reg, c, layer_param(i, "self_attention.dense"), c.hidden, c.hidden, 1, out_std);
      add_layernorm(reg, c, layer_param(i, "post_attention_layernorm"));
      add_linear(reg, c, layer_param(i, "mlp.dense_h_to_4h"), c.ffn, c.hidden, 0, c.init_std);
      add_linear(reg, c, layer_param(i, "mlp.dense_4h_to_h"), c.hidden, c.ffn, 1, out_std);
    }
  if (stage.post_process) add_layernorm(reg, c, "final_layernorm");
}

int64_t gpt_parameter_count(const GPTConfig& config) {
  ParamRegistry reg;
  register_gpt_params(reg, config, full_model(config));
  return reg.global_numel();
}

}  // namespace mtnlg
