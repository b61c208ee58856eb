// Recipe: the typed, validated form of a recipe YAML file (the schema in docs/recipes.md).
//
// load_recipe() reads the YAML, applies `--set key.path=value` overrides, rejects unknown keys,
// wrong types and impossible values with an Error whose context is the key path
// (e.g. "model.num_attention_heads") and whose message says the fix, and resolves relative
// paths against the working directory (as Megatron-LM does). Validation here is everything that
// can be checked without touching files or peers. check_supported() separately rejects values
// whose feature this build cannot train yet, so that --dry-run can still plan them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/attention_backend.h"
#include "core/backend.h"
#include "core/fp8_scaling.h"

namespace mtnlg {

// kFP8: the linear layers' GEMMs in FP8 with per-tensor scales (the recipe's fp8: section),
// everything else as bf16 (model/fp8_linear.h).
enum class Precision { kFP32, kBF16, kFP16, kFP8 };
// Where the ranks train: auto = a CUDA GPU when this build has the CUDA backend and one is
// visible, else the CPU.
enum class DeviceChoice { kAuto, kCpu, kCuda };
enum class DecayStyle { kCosine, kLinear, kConstant };
// How CPU ranks' groups communicate: auto = shared memory within a node, TCP across nodes.
enum class CpuTransport { kAuto, kShm, kTcp, kGloo };

struct ModelConfig {
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t ffn_hidden_size = 0;  // default 4 * hidden_size
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;  // default seq_length
  int64_t vocab_size = 50257;
  int64_t make_vocab_size_divisible_by = 128;
  Activation activation = Activation::kGelu;
  double layernorm_epsilon = 1e-5;
  double init_method_std = 0.02;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  AttentionBackend attention_backend = AttentionBackend::kAuto;
  std::string init_from;  // HF GPT-2 safetensors file, resolved; empty for random init
};

struct ParallelConfig {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  // Model chunks per pipeline rank for the interleaved 1F1B schedule (Megatron-LM's
  // --num-layers-per-virtual-pipeline-stage, expressed as chunks); 1: plain 1F1B.
  int64_t virtual_pipeline = 1;
  int64_t data = 0;  // 0 = derived from the world size
  int64_t micro_batch_size = 1;
  int zero_stage = 0;
  bool activation_checkpointing = false;
  // Sequence parallelism (Korthikanti et al. 2022, Megatron-LM's --sequence-parallel; off when
  // tensor is 1, as Megatron turns it off): between the tensor-parallel GEMMs each tensor rank
  // holds 1/tp of the token rows (LayerNorm, dropout, the residual stream), all-gathered before the
  // column-parallel GEMMs and reduce-scattered after the row-parallel ones instead of all-reduced.
  bool sequence_parallel = false;
  // A collective or send/recv that waits longer than this fails, naming the group, the
  // operation and the peer (also the rendezvous).
  int64_t timeout_s = 300;
  // Data parallel (without ZeRO): all-reduce each gradient bucket as soon as backward has
  // finished it, on a communication thread, overlapping the rest of backward (Megatron-LM's
  // --overlap-grad-reduce). false: all buckets after backward.
  bool overlap_grad_reduce = true;
  // Gradients are all-reduced in buckets of about this many MiB, last layers first.
  double grad_bucket_mb = 25.0;
  // The dtype gradients are summed over data ranks in under bf16: fp32 (the main gradients,
  // Megatron's default) or bf16 (half the bytes). fp32 training always reduces in fp32.
  Precision grad_reduce_dtype = Precision::kFP32;
  // CPU ranks' groups: auto (shared memory within a node, TCP across nodes), shm, tcp or gloo
  // (docs/cpu-transports.md). GPU ranks use NCCL whatever it says. MTNLG_TRANSPORT, when set,
  // overrides it (the older switch, kept).
  CpuTransport transport = CpuTransport::kAuto;
  // Each micro-batch's forward and backward replayed from one capture (Backend::capture: a CUDA
  // graph on a GPU, one launch for the micro-batch's kernels; the same calls on the CPU), the
  // loader, the optimizer and communication outside it (Megatron-LM's --enable-cuda-graph
  // covers the layers; here the whole stage). One stage without tensor shards; data ranks with
  // the gradients reduced after backward (overlap_grad_reduce false, or ZeRO-1); not fp8.
  bool cuda_graph = false;
};

struct OptimizerConfig {
  double lr = 1e-4;
  double min_lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double clip_grad = 1.0;  // 0 disables clipping
  // fp16 loss scaling, Megatron's semantics and defaults: loss_scale 0 = dynamic (start at
  // initial_loss_scale; halve after `hysteresis` overflowing iterations, never below
  // min_loss_scale; double after loss_scale_window clean ones), > 0 = that static scale.
  double loss_scale = 0.0;
  double initial_loss_scale = 4294967296.0;  // 2^32
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  double min_loss_scale = 1.0;
};

struct ScheduleConfig {
  int64_t warmup_tokens = 0;
  int64_t decay_tokens = 0;  // default: train_tokens
  // False when decay_tokens was derived from the run's length (messages then name the keys it
  // came from, not a key the user never set).
  bool decay_tokens_set = false;
  DecayStyle decay_style = DecayStyle::kCosine;
  int64_t train_tokens = 0;  // 0 = unset; at least one of train_tokens/train_iters is set
  int64_t train_iters = 0;
  // Save a checkpoint and exit 75 once the run has lasted this long (Megatron-LM's
  // --exit-duration-in-mins), before a job's time limit; 0: off.
  double exit_duration_minutes = 0.0;
};

struct RampupConfig {
  int64_t start = 0;  // 0 = no ramp
  int64_t increment = 0;
  int64_t tokens = 0;
};

struct BatchConfig {
  int64_t global_batch_size = 0;
  RampupConfig rampup;
};

struct BlendEntry {
  std::string prefix;  // resolved path prefix of PREFIX.bin / PREFIX.idx
  double weight = 1.0;
};

struct DataConfig {
  std::vector<BlendEntry> blend;
  std::vector<double> split = {1.0, 0.0, 0.0};  // train, valid, test (any positive scale)
  uint64_t seed = 1234;
  bool shuffle = true;
  std::string cache_dir;  // resolved; default "<cwd>/cache"
};

struct CheckpointConfig {
  std::string dir;  // resolved; empty = no checkpoints
  int64_t save_interval = 0;
  int64_t keep_last = 0;  // 0 = keep all
  bool async = false;
  bool resume = false;
  // A checkpoint (an iter_NNNNNNN directory, or a root whose latest is meant) to start from when
  // dir holds none yet (Megatron-LM's --load); resolved; empty: none.
  std::string load;
  // false: take the weights alone from `load` (fine-tuning: new optimizer, iteration 0, data from
  // the start).
  bool load_optimizer = true;
  // The iteration to start from (Megatron-LM's --ckpt-step) instead of the latest, in dir when
  // resuming from it, else in load; -1: the latest.
  int64_t load_iteration = -1;
};

struct LoggingConfig {
  int64_t interval = 10;
  std::string metrics_file;  // resolved; default "metrics.jsonl"
  // TensorBoard event files of the same scalars, named as Megatron-LM names them ("" = none).
  std::string tensorboard_dir;  // resolved
};

struct EvalConfig {
  int64_t interval = 0;  // 0 = no evaluation
  int64_t iters = 0;
  // lm-evaluation-harness tasks scored every tasks_interval iterations (0 = never), as
  // mtnlg-eval --tasks scores them (docs/evaluation.md): the task names, TASK_DIR/TASK/SPLIT.jsonl,
  // the few-shot count, the first tasks_limit documents of each (0 = all), GPT-2's BPE files.
  std::vector<std::string> tasks;
  int64_t tasks_interval = 0;
  std::string task_dir;
  int64_t num_fewshot = 0;
  int64_t tasks_limit = 0;
  std::string vocab_file, merge_file;  // "" = tokenizer.*, else data/gpt2/encoder.json, vocab.bpe
};

// The GPT-2 BPE tokenizer the data was made with (Megatron-LM's --vocab-file, --merge-file): every
// checkpoint carries a copy (checkpoint/tokenizer_files.h). "": data/gpt2/ in the current
// directory when present and of model.vocab_size tokens, else none.
struct TokenizerConfig {
  std::string vocab_file, merge_file;  // resolved
};

struct Recipe {
  ModelConfig model;
  ParallelConfig parallel;
  Precision precision = Precision::kFP32;
  // fp8: (read with precision: fp8): format hybrid|e4m3, scaling delayed|current,
  // amax_history_len, margin, amax_compute_algo max|most_recent (Transformer Engine's defaults),
  // cache_weights (true: each weight cast once per iteration).
  Fp8Options fp8;
  DeviceChoice device = DeviceChoice::kAuto;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  BatchConfig batch;
  DataConfig data;
  CheckpointConfig checkpoint;
  LoggingConfig logging;
  EvalConfig eval;
  TokenizerConfig tokenizer;
  uint64_t seed = 1234;

  // Vocabulary padded to a multiple of make_vocab_size_divisible_by * tensor (Megatron's rule,
  // so each tensor-parallel shard is a multiple of make_vocab_size_divisible_by).
  int64_t padded_vocab_size() const;
  // Tokens per iteration at the full global batch.
  int64_t tokens_per_iteration() const { return batch.global_batch_size * model.seq_length; }
};

// Parses `yaml_text` (from `source`, for messages), applies overrides ("a.b.c=value", value
// parsed as YAML), validates. Throws Error with the key path as context.
Recipe parse_recipe(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& source = "<recipe>");
// Reads `path` then parse_recipe. A missing file is kNotFound naming it.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides);

// The model section's checks alone (positive counts, their upper bounds, layernorm_epsilon > 0,
// heads dividing hidden, positions covering seq_length): the one sizing rule for a model read
// from elsewhere (a Hugging Face config.json) before anything is allocated from it. Throws Error
// naming the model.* key.
void validate_model_config(const ModelConfig& model);

// Throws kUnsupported naming the first key whose feature this build cannot train yet.
// Why parallel.cuda_graph cannot run with `data_size` data-parallel ranks ("" where it can):
// check_supported asks with parallel.data, the trainer with the size the world gives.
std::string cuda_graph_data_refusal(const Recipe& recipe, int64_t data_size);
void check_supported(const Recipe& recipe);

// The fully resolved recipe as YAML (every key, defaults filled in), for logs and run dirs.
std::string recipe_to_yaml(const Recipe& recipe);

const char* precision_name(Precision p);
const char* device_choice_name(DeviceChoice d);
const char* cpu_transport_name(CpuTransport t);
const char* attention_backend_name(AttentionBackend a);
// The dtype of the model's weights and activations for a precision (f32, bf16, f16).
DType precision_dtype(Precision p);
const char* decay_style_name(DecayStyle d);
const char* activation_name(Activation a);

}  // namespace mtnlg
