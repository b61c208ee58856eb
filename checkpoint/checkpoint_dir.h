// A checkpoint root directory (checkpoint.dir) and its committed checkpoints, Megatron-LM's layout:
//
//   DIR/latest_checkpointed_iteration.txt   the latest committed iteration, e.g. "100"
//   DIR/iter_0000100/manifest.json          committed: the manifest is written last
//   DIR/iter_0000100/model_tp00_pp000.safetensors ... optim_tp00_pp000_dp000.safetensors
//   DIR/iter_0000150.tmp/                   a save in progress (or interrupted: stale)
//
// A save writes every file into ITER.tmp/, then global rank 0 writes the manifest there, renames
// ITER.tmp to ITER, fsyncs DIR, and only then replaces the latest file (by rename). A crash at any
// moment leaves the previous checkpoint and the latest file as they were, or the new checkpoint
// complete. These functions are rank 0's (or a tool's); none is collective.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtnlg {

inline constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";

std::string iteration_dir_name(int64_t iteration);  // "iter_0000100"
// The directory a save of `iteration` writes into before its commit.
std::string temp_dir_path(const std::string& root, int64_t iteration);

// Iterations of the committed checkpoints under `root` (iter_* directories holding a manifest),
// ascending. A missing root has none.
std::vector<int64_t> committed_iterations(const std::string& root);
// The iteration the latest file names; nullopt without the file. A file that is not one
// non-negative integer is corruption naming it.
std::optional<int64_t> read_latest(const std::string& root);

// The checkpoint directory `path` means: an iter_NNNNNNN directory (holding a manifest) itself,
// or a root's latest committed checkpoint. nullopt for a root without any (missing or empty);
// a path that exists but is neither (a file, a directory with a latest file naming a missing
// checkpoint) throws naming it.
std::optional<std::string> find_checkpoint(const std::string& path);

// Rank 0 at the start of a run: creates `root` (a file there is io_error naming it), removes
// stale temporaries (returned, for the log), and finishes an interrupted commit: a committed
// iter directory newer than the latest file becomes the latest (returned in `rolled_forward`).
std::vector<std::string> prepare_root(const std::string& root,
                                      std::optional<int64_t>* rolled_forward = nullptr);

// Rank 0 after every rank's files are in temp_dir_path(root, iteration) and the manifest too:
// fsync, rename to iter_NNNNNNN (replacing an older copy of that iteration), fsync root, write
// the latest file atomically.
void commit_checkpoint(const std::string& root, int64_t iteration);

// Deletes committed checkpoints older than the newest `keep_last` (0: keep all); each is renamed
// out of the iter_ namespace first, so a crash mid-delete never leaves a partial iter_ directory.
// Returns the iterations removed.
std::vector<int64_t> prune_checkpoints(const std::string& root, int64_t keep_last);

}  // namespace mtnlg
