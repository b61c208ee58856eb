// Hugging Face GPT-2 weights <-> our GPT parameters.
//
// HF GPT-2 (GPT2Model / GPT2LMHeadModel state dicts, as in the released model.safetensors):
//   wte.weight [V, h]   wpe.weight [P, h]   ln_f.{weight,bias} [h]
//   h.{i}.ln_1.{weight,bias}, h.{i}.ln_2.{weight,bias}                 [h]
//   h.{i}.attn.c_attn.weight [h, 3h]   bias [3h]   Conv1D: [in, out]; output columns are
//                                                  q of all heads | k of all heads | v
//   h.{i}.attn.c_proj.weight [h, h]    bias [h]
//   h.{i}.mlp.c_fc.weight [h, 4h]      bias [4h]
//   h.{i}.mlp.c_proj.weight [4h, h]    bias [h]
// optionally with a "transformer." prefix, plus buffers h.{i}.attn.bias / h.{i}.attn.masked_bias
// (ignored) and lm_head.weight (accepted only if equal to wte: our head is tied).
//
// Ours (model/gpt_params.h): Linear weights [out, in], so every Conv1D weight is transposed, and
// the fused QKV rows are ordered per head (q_j, k_j, v_j), so c_attn's columns are regrouped.
// The word embedding has padded_vocab rows; rows >= vocab are zero after a load.
// Works for f32 and f64 models; the file may be F32, F64, F16 or BF16. Not thread-safe (uses
// the model's backend).
#pragma once

#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/gpt_stage.h"

namespace mtnlg {

// Loads every parameter `model`'s stage holds from the safetensors file at `path` (with tensor
// parallelism, this rank's shard of each). The file must hold the whole model (tensors of other
// stages are checked, not loaded). Throws
// invalid_argument / not_found / corruption naming the file and the tensor: a shape that does not
// match the model config (both shapes named), a missing or unexpected tensor, wpe rows !=
// max_position_embeddings, wte rows != vocab_size, lm_head.weight != wte.weight.
void load_hf_gpt2(GPTStage& model, const std::string& path);

// The model shape of a Hugging Face GPT-2 config.json (n_layer, n_embd, n_head, n_inner or
// 4 n_embd, n_positions, vocab_size, activation_function: "gelu" is the exact erf GeLU,
// "gelu_new" / "gelu_pytorch_tanh" / "gelu_fast" the tanh approximation, layer_norm_epsilon),
// for a whole model at tensor size 1; the vocabulary padded to a multiple of 128 as the trainer
// pads it. Throws not_found for a missing file, corruption for bad JSON, invalid_argument
// naming the field for a missing or unusable one.
GPTConfig hf_gpt2_config(const std::string& config_json);

// One tensor in HF layout: a new CPU tensor in the model's dtype.
struct HFTensor {
  std::string name;  // HF name without the "transformer." prefix, e.g. "h.0.attn.c_attn.weight"
  Tensor tensor;
};

// Every parameter the stage holds (its value, or its gradient when `grads`), mapped to HF
// name and layout (wte without the padded rows). Takes the model non-const because reading
// device memory goes through its backend.
std::vector<HFTensor> to_hf_gpt2(GPTStage& model, bool grads);

// Adds to_hf_gpt2(model, grads) to `out` (the caller commits).
void export_hf_gpt2(GPTStage& model, bool grads, SafetensorsWriter& out);

}  // namespace mtnlg
