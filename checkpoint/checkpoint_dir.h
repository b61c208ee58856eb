// A checkpoint root directory (checkpoint.dir) and its committed checkpoints, Megatron-LM's layout:
//
//   DIR/latest_checkpointed_iteration.txt   the latest committed iteration, e.g. "100"
//   DIR/iter_0000100/manifest.json          committed: the manifest is written last
//   DIR/iter_0000100/model_tp00_pp000.safetensors ... optim_tp00_pp000_dp000.safetensors
//   DIR/iter_0000150.tmp/                   a save in progress (or interrupted: stale)
//   DIR/commit_in_progress.txt              the iteration a commit is renaming into place
//   DIR/iter_0000100/pinned.txt             a person's pin: keep_last never deletes it
//
// A save writes every file into ITER.tmp/, then global rank 0 writes the manifest there, writes
// the commit marker, renames ITER.tmp to ITER, fsyncs DIR, replaces the latest file (by rename)
// and removes the marker. A crash at any moment leaves the previous checkpoint and the latest file
// as they were, or the new checkpoint complete (the marker says which commit to finish). The
// latest file is the truth otherwise: a person who writes an older committed iteration into it
// (Megatron's way of rolling back) is obeyed, the newer directories left alone until this run
// saves over them. These functions are rank 0's (or a tool's); none is collective.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mtnlg {

inline constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";
inline constexpr const char* kCommitMarkerFile = "commit_in_progress.txt";
inline constexpr const char* kPinFile = "pinned.txt";

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

// The committed checkpoint of `iteration` that `path` (a root, or an iter_ directory) holds
// (checkpoint.load_iteration, Megatron's --ckpt-step); not_found naming `key`, the path and the
// committed iterations otherwise.
std::string find_checkpoint_at(const std::string& path, int64_t iteration, const std::string& key);

// Whether a committed checkpoint directory is pinned (holds kPinFile), and its note.
std::optional<std::string> pin_note(const std::string& checkpoint_dir);

// What prepare_root found and did, for the log.
struct RootState {
  std::vector<std::string> removed;        // stale temporaries
  std::optional<int64_t> rolled_forward;   // the latest file now names this iteration
  std::string rolled_because;              // why: an interrupted commit, no latest file, ...
  std::optional<int64_t> latest;           // what the latest file names afterwards
  std::vector<int64_t> newer_than_latest;  // committed, newer than latest: left alone
};

// Rank 0 at the start of a run: creates `root` (a file there is io_error naming it), removes
// stale temporaries, and settles the latest file: a commit the marker names that renamed its
// directory but died before the latest file becomes the latest; a missing or unreadable latest
// file becomes the newest committed iteration; a latest file naming a committed iteration wins
// over newer directories (a person rolled back).
RootState prepare_root(const std::string& root);

// Rank 0 after every rank's files are in temp_dir_path(root, iteration) and the manifest too:
// fsync, write the commit marker, rename to iter_NNNNNNN, fsync root, write the latest file
// atomically, remove the marker. An older copy of that iteration (a run resumed from before it)
// is replaced; a pinned one is kept as iter_NNNNNNN.pinned-N (returned, for the log).
std::optional<std::string> commit_checkpoint(const std::string& root, int64_t iteration);

// Deletes committed checkpoints older than the newest `keep_last` unpinned ones at or below the
// latest (0: keep all). Never the latest, never a pinned one, never one newer than the latest
// (another timeline a person rolled back from: it is replaced when this run saves over it). Each
// is renamed out of the iter_ namespace first, so a crash mid-delete never leaves a partial iter_
// directory. Returns the iterations removed.
std::vector<int64_t> prune_checkpoints(const std::string& root, int64_t keep_last);

}  // namespace mtnlg
