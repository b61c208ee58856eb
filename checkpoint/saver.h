// CheckpointSaver: writes one rank's shards of a checkpoint and commits the checkpoint with the
// other ranks (checkpoint/checkpoint_dir.h describes the directory and the commit).
//
// A save of iteration N, on every rank:
//   1. write this rank's files into DIR/iter_N.tmp/ (each written, fsynced and renamed into place,
//      its size and XXH3 taken from the bytes as written);
//   2. all-gather (file names, sizes, checksums, ok) over the save group: that is the barrier;
//   3. global rank 0, if every rank succeeded, writes the manifest (its files list from step 2),
//      renames the directory to iter_N, fsyncs DIR, replaces the latest file, applies keep_last;
//   4. broadcast of rank 0's outcome: every rank returns, or throws io_error naming the rank that
//      failed (then nothing was committed and the previous checkpoint is as it was).
// Synchronous: save() does all of it. Asynchronous: save() copies the state to host memory (the
// only stall) and a background thread does 1-4 on the save group's own connections; at most one
// save is in flight (save() waits for the previous one), check() rethrows a finished save's
// failure at the next iteration boundary, wait() joins (end of training, preemption).
//
// Ownership: borrows the communicator (null: one process), which only this object's thread uses
// while a save is in flight. Asynchronous saves keep one host copy of this rank's state between
// saves (the memory cost of not stalling). Not thread-safe (the trainer's thread calls it).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/manifest.h"
#include "checkpoint/shard_io.h"
#include "checkpoint/tokenizer_files.h"
#include "core/backend.h"
#include "core/state_tensor.h"
#include "parallel/communicator.h"

namespace mtnlg {

// What one rank writes: up to two files (an empty name: this rank writes none of that kind).
struct RankShards {
  std::string model_file;
  std::vector<StateTensor> model;
  std::string optim_file;
  std::vector<StateTensor> optim;
  ShardCoords coords;
};

struct SaveStats {
  int64_t iteration = 0;
  double stall_ms = 0.0;      // the time save() blocked training
  double write_seconds = 0;   // this rank's file writing (for async: in the background)
  int64_t bytes_written = 0;  // by this rank
};

class CheckpointSaver {
 public:
  CheckpointSaver(std::string root, int64_t keep_last, bool async, Communicator* comm);
  ~CheckpointSaver();  // waits for a save in flight; its failure is logged
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Saves `shards` as iteration manifest.iteration (collective over the save group). Rank 0's
  // `manifest` is the one written (its files list is filled in here). `before_commit(stall_ms)`,
  // if given, runs on this thread once the state is safe and before the commit (sync: after
  // every rank's files are written; async: after the copy): the trainer writes the iteration's
  // metrics lines there, so that a committed checkpoint always has them on disk.
  SaveStats save(RankShards shards, CheckpointManifest manifest, Backend& backend,
                 const std::function<void(double)>& before_commit = {});
  // Asynchronous saves: allocates (and touches) the host copies for state shaped as `shards` now,
  // at start, so that no save pays for the allocation as stall. No-op for synchronous saves.
  void reserve(const RankShards& shards);
  // Rank 0 copies this tokenizer into every checkpoint (tokenizer/, listed in the manifest); set
  // before the first save. `model_max_length` goes into its tokenizer_config.json.
  void set_tokenizer(TokenizerFiles files, int64_t model_max_length) {
    tokenizer_ = std::move(files);
    tokenizer_max_length_ = model_max_length;
  }
  // Rethrows the failure of a finished asynchronous save; never blocks.
  void check();
  // Blocks until no save is in flight; rethrows its failure.
  void wait();
  // The last finished save's statistics (write time and bytes; the stall of its save() call).
  SaveStats last_finished() const;

 private:
  void write_and_commit(const RankShards& shards, CheckpointManifest manifest, SaveStats stats,
                        const std::function<void()>& before_commit = {});
  // The k-th staging tensor, (re)allocated to `like`'s shape and dtype.
  Tensor& staging(size_t k, const Tensor& like);
  void join();

  std::string root_;
  int64_t keep_last_;
  bool async_;
  Communicator* comm_;
  std::thread thread_;
  std::atomic<bool> done_{true};
  mutable std::mutex mu_;
  std::exception_ptr error_;  // guarded by mu_
  SaveStats finished_;        // guarded by mu_
  // Asynchronous saves: host copies of the state, reused from save to save (no save is in flight
  // when save() fills them), so that a save's stall is one copy, not an allocation.
  std::vector<Tensor> staging_;
  std::optional<TokenizerFiles> tokenizer_;
  int64_t tokenizer_max_length_ = 0;
};

}  // namespace mtnlg
