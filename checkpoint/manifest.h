// The checkpoint manifest, DIR/iter_NNNNNNN/manifest.json: everything about a checkpoint that is
// not a tensor, and the list of its files with their sizes and checksums. It is written last, by
// global rank 0, once every rank's files are on disk; a directory without it was never committed.
//
// Example (abridged):
//   {"format_version": 1, "iteration": 100, "consumed_samples": 800, "consumed_tokens": 102400,
//    "valid_consumed_samples": 32, "optimizer_steps": 100, "has_optimizer": true,
//    "schedule": {"lr": 0.00029, "global_batch_size": 8},
//    "rng": {"seed": 1234, "data_seed": 1234, "dropout": "philox(seed, sample / micro_batch_size)",
//            "next_micro_batch_id": 200},
//    "layout": {"tensor": 2, "pipeline": 2, "data": 2, "zero_stage": 1, "micro_batch_size": 4},
//    "model": {"num_layers": 4, "hidden_size": 64, ..., "padded_vocab_size": 512},
//    "files": [{"name": "model_tp00_pp000.safetensors", "bytes": 123, "xxh3": "xxh3:..."}, ...],
//    "recipe": "<the resolved recipe YAML>"}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mtnlg {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";

struct ManifestFile {
  std::string name;  // relative to the checkpoint directory
  int64_t bytes = 0;
  uint64_t xxh3 = 0;
};

// The model keys a checkpoint's tensors depend on; resuming with another value is an error.
struct ManifestModel {
  int64_t num_layers = 0, hidden_size = 0, num_attention_heads = 0, ffn_hidden_size = 0;
  int64_t seq_length = 0, max_position_embeddings = 0, vocab_size = 0, padded_vocab_size = 0;
};

struct CheckpointManifest {
  int format_version = kCheckpointFormatVersion;
  int64_t iteration = 0;
  int64_t consumed_samples = 0;  // the data position: the next sample to train on
  int64_t consumed_tokens = 0;
  int64_t valid_consumed_samples = 0;  // the validation loader's position
  int64_t optimizer_steps = 0;         // Adam's bias-correction step count
  bool has_optimizer = true;           // optimizer files present
  double lr = 0.0;                     // the rate of the last iteration (informative)
  // fp16 loss scaling (optim/loss_scaler.h): iterations skipped on an overflow so far, and their
  // tokens, which the LR schedule does not count (Megatron's scheduler steps only on updates);
  // the scaler's state. Absent in older manifests: 0 skipped, no scaler state (scale 0).
  int64_t skipped_iterations = 0, skipped_tokens = 0;
  double loss_scale = 0.0;
  int64_t loss_scale_growth_tracker = 0, loss_scale_hysteresis_tracker = 0;
  int64_t global_batch_size = 0;  // of the next iteration (the batch ramp's position)
  uint64_t seed = 0, data_seed = 0;
  int64_t next_micro_batch_id = 0;  // dropout streams are keyed by sample / micro_batch_size
  int64_t tensor = 1, pipeline = 1, data = 1, micro_batch_size = 1;
  int zero_stage = 0;
  ManifestModel model;
  std::vector<ManifestFile> files;
  std::string recipe_yaml;
};

std::string manifest_to_json(const CheckpointManifest& m);
// Throws corruption naming `path` (a syntax error, a missing or mistyped field) or, for a
// format_version above ours, unsupported-by-this-build as corruption with the fix.
CheckpointManifest parse_manifest(std::string_view text, const std::string& path);
// The one check of a manifest against itself, its directory and its layout, run by
// parse_manifest: the iteration is its directory's; the model passes the recipe's checks and
// bounds (core/config/recipe.h); the layout is positive and divides the model; the files are
// listed once each and are exactly the shards the layout writes (plus the tokenizer's). Throws
// corruption naming `path` and the field.
void validate_manifest(const CheckpointManifest& m, const std::string& path);
// Reads DIR/manifest.json; a missing one is not_found naming it.
CheckpointManifest read_manifest(const std::string& dir);

}  // namespace mtnlg
