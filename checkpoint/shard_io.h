// Checkpoint shard files: state (core/state_tensor.h) to safetensors and back, by global
// coordinates, so a checkpoint of one layout loads in any other.
//
// File names (per checkpoint directory):
//   model_tp{TT}_pp{PPP}.safetensors          the parameters of tensor rank TT, stage PPP (written
//   by
//                                             data rank 0)
//   optim_tp{TT}_pp{PPP}_dp{DDD}.safetensors  Adam moments: every data rank's partition with
//   ZeRO-1,
//                                             data rank 0's whole shard without
// Each tensor carries, in the header's __metadata__ under its own name, where it sits in the whole
// tensor: {"global_shape":[V,h],"start":[r,0],"shape":[V/tp,h],"flat":[b,e],"valid_rows":n}
// (the box of the shard, the element range of that box the tensor holds, the rows that are not
// vocabulary padding). A tensor holding its whole box is stored in the box's shape, a ZeRO-1
// piece as 1-D. File-level metadata: mtnlg.tensor_rank, mtnlg.pipeline_rank, mtnlg.data_rank.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "core/state_tensor.h"

namespace mtnlg {

class SafetensorsFile;

std::string model_file_name(int64_t tensor_rank, int64_t pipeline_rank);
std::string optim_file_name(int64_t tensor_rank, int64_t pipeline_rank, int64_t data_rank);

struct ShardCoords {
  int64_t tensor = 0, pipeline = 0, data = 0;
};

// Writes `state` to `path` (atomically; host tensors); returns its size and checksum.
FileDigest write_shard_file(const std::string& path, const std::vector<StateTensor>& state,
                            const ShardCoords& coords);

// The tensors of one checkpoint directory, indexed by name across its files. Files are opened
// (mmap, header validated, size checked against the manifest) on first need; a file's checksum is
// checked against the manifest the first time one of its tensors is read. Every error names the
// file and says what to do. Not thread-safe.
class ShardIndex {
 public:
  ShardIndex(std::string dir, const CheckpointManifest& manifest);
  ~ShardIndex();
  ShardIndex(const ShardIndex&) = delete;
  ShardIndex& operator=(const ShardIndex&) = delete;

  // Fills `out` (a CPU tensor of target.flat_end - target.flat_begin elements, f32 or f64) with
  // the elements `target` describes (its name, global shape, box and flat range), gathered from
  // whichever shards hold them. Rows at or past valid_rows that no shard holds are zero (the
  // vocabulary padding of another tensor-parallel size); any other element no shard holds is a
  // missing shard (not_found naming the tensor and the files looked at).
  void read(const StateTensor& target, Tensor& out);
  // Names of every tensor in files whose name starts with `file_prefix` ("model_", "optim_").
  std::vector<std::string> names(const std::string& file_prefix);
  // Global shape of `name` (the largest valid_rows-compatible one seen).
  Shape global_shape(const std::string& name);
  // Checks every listed file's size and checksum (mtnlg-ckpt verify).
  void verify_all();
  // Where a checkpoint holds replicas of one piece (a replicated parameter on every tensor rank,
  // the tied word embeddings on the first and last stage), read the replica this (tensor,
  // pipeline) rank saved when there is one: the copies may differ in the last bit (ZeRO-1 sums
  // each copy's gradient in another order), and a resume in the same layout must be exact.
  // Otherwise, and by default, the lowest (tensor, pipeline) rank's replica.
  void prefer_replica(int64_t tensor_rank, int64_t pipeline_rank) {
    preferred_ = {tensor_rank, pipeline_rank};
  }

 private:
  struct Piece;
  struct File;
  void open_files(const std::string& prefix);
  File& open(size_t file);
  void check_sum(File& f);
  std::vector<const Piece*> pieces_of(const std::string& name);

  std::string dir_;
  CheckpointManifest manifest_;
  std::vector<std::unique_ptr<File>> files_;  // one per manifest file, opened lazily
  std::map<std::string, std::vector<Piece>> pieces_;
  std::map<std::string, bool> opened_prefixes_;
  std::pair<int64_t, int64_t> preferred_{-1, -1};
};

}  // namespace mtnlg

namespace mtnlg {

class Backend;

// Fills every target's tensor (on `backend`) from `index` (ShardIndex::read, then a copy).
void load_state(ShardIndex& index, const std::vector<StateTensor>& targets, Backend& backend);

}  // namespace mtnlg
