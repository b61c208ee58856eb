#include "checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "core/input_file.h"
#include "core/status.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIterPrefix = "iter_";
constexpr const char* kTempSuffix = ".tmp";
constexpr const char* kDeletingPrefix = ".deleting.";

// "iter_0000100" -> 100; nullopt for any other name.
std::optional<int64_t> parse_iteration_dir(const std::string& name) {
  const std::string prefix = kIterPrefix;
  if (name.size() < prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  int64_t v = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw io_error("cannot remove: " + ec.message(), p.string());
}

}  // namespace

std::string iteration_dir_name(int64_t iteration) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "iter_%07lld", static_cast<long long>(iteration));
  return buf;
}

std::string temp_dir_path(const std::string& root, int64_t iteration) {
  return (fs::path(root) / (iteration_dir_name(iteration) + kTempSuffix)).string();
}

std::vector<int64_t> committed_iterations(const std::string& root) {
  std::vector<int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const auto it = parse_iteration_dir(e.path().filename().string());
    if (it && fs::is_regular_file(e.path() / kManifestFile, ec)) out.push_back(*it);
  }
  if (ec) throw io_error("cannot list: " + ec.message(), root);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<int64_t> read_latest(const std::string& root) {
  const fs::path path = fs::path(root) / kLatestFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::string text = read_input_file(path.string());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  int64_t v = 0;
  bool ok = !text.empty() && text.size() < 12;
  for (const char c : text) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok)
    throw corruption("'" + text.substr(0, 40) +
                         "' is not an iteration number; write the iteration of a committed "
                         "checkpoint in it (ls the iter_* directories) or remove it",
                     path.string());
  return v;
}

std::optional<std::string> find_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) return std::nullopt;
  if (!fs::is_directory(p, ec))
    throw io_error(
        "is not a directory; checkpoint paths are a checkpoint root or one of its "
        "iter_NNNNNNN directories",
        path);
  if (fs::exists(p / kManifestFile, ec)) return p.string();
  if (parse_iteration_dir(p.filename().string()))
    throw not_found("the checkpoint has no " + std::string(kManifestFile) +
                        " (it was never committed); name a committed iter_ directory or the root",
                    path);
  const std::optional<int64_t> latest = read_latest(path);
  if (!latest) {
    const std::vector<int64_t> committed = committed_iterations(path);
    if (committed.empty()) return std::nullopt;
    return (p / iteration_dir_name(committed.back())).string();
  }
  const fs::path dir = p / iteration_dir_name(*latest);
  if (!fs::exists(dir / kManifestFile, ec))
    throw not_found(std::string(kLatestFile) + " names iteration " + std::to_string(*latest) +
                        " but " + dir.string() +
                        " is not a committed checkpoint; restore it, or write the iteration of "
                        "an existing iter_ directory into the latest file",
                    (p / kLatestFile).string());
  return dir.string();
}

std::string find_checkpoint_at(const std::string& path, int64_t iteration, const std::string& key) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::exists(p / kManifestFile, ec)) {
    // An iter_ directory itself: it must be that iteration.
    const CheckpointManifest m = read_manifest(p.string());
    if (m.iteration != iteration)
      throw not_found(key + " is " + std::to_string(iteration) + " but " + path + " is iteration " +
                          std::to_string(m.iteration) + "; the fix: name its root, or set " + key +
                          ": " + std::to_string(m.iteration),
                      key);
    return p.string();
  }
  const fs::path dir = p / iteration_dir_name(iteration);
  if (fs::exists(dir / kManifestFile, ec)) return dir.string();
  std::string have;
  for (const int64_t it : committed_iterations(path))
    have += (have.empty() ? "" : ", ") + std::to_string(it);
  throw not_found(key + " is " + std::to_string(iteration) + " but " + path +
                      " holds no committed checkpoint of that iteration (committed: " +
                      (have.empty() ? std::string("none") : have) +
                      "); the fix: one of those, or "
                      "remove the key to load the latest",
                  key);
}

std::optional<std::string> pin_note(const std::string& checkpoint_dir) {
  const fs::path pin = fs::path(checkpoint_dir) / kPinFile;
  std::error_code ec;
  if (!fs::is_regular_file(pin, ec)) return std::nullopt;
  std::string note = read_input_file(pin.string());
  while (!note.empty() && (note.back() == '\n' || note.back() == ' ')) note.pop_back();
  return note;
}

RootState prepare_root(const std::string& root) {
  std::error_code ec;
  if (fs::exists(root, ec) && !fs::is_directory(root, ec))
    throw io_error(
        "checkpoint.dir is a file, not a directory; set checkpoint.dir to a directory "
        "(it is created if missing)",
        root);
  fs::create_directories(root, ec);
  if (ec) throw io_error("cannot create checkpoint.dir: " + ec.message(), root);
  RootState state;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const bool temp = name.size() > 4 && name.compare(name.size() - 4, 4, kTempSuffix) == 0 &&
                      (name.rfind(kIterPrefix, 0) == 0 || name.rfind(kLatestFile, 0) == 0 ||
                       name.rfind(kCommitMarkerFile, 0) == 0);
    if (temp || name.rfind(kDeletingPrefix, 0) == 0) state.removed.push_back(e.path().string());
  }
  if (ec) throw io_error("cannot list: " + ec.message(), root);
  for (const std::string& p : state.removed) remove_tree(p);
  const std::vector<int64_t> committed = committed_iterations(root);
  const auto is_committed = [&](int64_t it) {
    return std::binary_search(committed.begin(), committed.end(), it);
  };
  const fs::path latest_path = fs::path(root) / kLatestFile;
  const fs::path marker_path = fs::path(root) / kCommitMarkerFile;
  std::optional<int64_t> latest;
  std::string unreadable;
  try {
    latest = read_latest(root);
  } catch (const Error& e) {
    unreadable = e.what();
  }
  // The commit the marker names renamed its directory but died before the latest file.
  std::optional<int64_t> marked;
  if (fs::exists(marker_path, ec)) {
    std::string text = read_input_file(marker_path.string());
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size() && v >= 0) marked = v;
    } catch (const std::exception&) {
    }
  }
  std::optional<int64_t> target;
  if (marked && is_committed(*marked) && latest != marked) {
    target = marked;
    state.rolled_because = "a save of iteration " + std::to_string(*marked) +
                           " was interrupted after its directory was committed";
  } else if (!latest && !committed.empty()) {
    target = committed.back();
    state.rolled_because = unreadable.empty()
                               ? std::string("there was no ") + kLatestFile
                               : std::string("the latest file was unreadable (") + unreadable + ")";
  }
  if (target) {
    write_file_atomic(latest_path.string(), std::to_string(*target) + "\n");
    state.rolled_forward = target;
    latest = target;
  }
  if (fs::exists(marker_path, ec)) {
    fs::remove(marker_path, ec);
    if (ec) throw io_error("cannot remove: " + ec.message(), marker_path.string());
    fsync_dir(root);
  }
  state.latest = latest;
  if (latest && is_committed(*latest))
    for (const int64_t it : committed)
      if (it > *latest) state.newer_than_latest.push_back(it);
  if (!state.removed.empty()) fsync_dir(root);
  return state;
}

std::optional<std::string> commit_checkpoint(const std::string& root, int64_t iteration) {
  const fs::path tmp = temp_dir_path(root, iteration);
  const fs::path final_dir = fs::path(root) / iteration_dir_name(iteration);
  fsync_dir(tmp.string());
  std::optional<std::string> kept_aside;
  std::error_code ec;
  write_file_atomic((fs::path(root) / kCommitMarkerFile).string(),
                    std::to_string(iteration) + "\n");
  if (fs::exists(final_dir, ec)) {
    if (pin_note(final_dir.string())) {
      // A pinned checkpoint of another timeline (a rollback's): kept, out of the iter_ names.
      for (int n = 1;; ++n) {
        const fs::path aside =
            fs::path(root) / (iteration_dir_name(iteration) + ".pinned-" + std::to_string(n));
        if (fs::exists(aside, ec)) continue;
        fs::rename(final_dir, aside, ec);
        if (ec) throw io_error("cannot move aside: " + ec.message(), final_dir.string());
        kept_aside = aside.string();
        break;
      }
    } else {
      // An older save of this iteration (a run resumed from before it): out of the way first.
      const fs::path aside = fs::path(root) / (kDeletingPrefix + iteration_dir_name(iteration));
      remove_tree(aside);
      fs::rename(final_dir, aside, ec);
      if (ec) throw io_error("cannot move aside: " + ec.message(), final_dir.string());
      remove_tree(aside);
    }
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw io_error("cannot rename " + tmp.string() + ": " + ec.message(), final_dir.string());
  fsync_dir(root);
  write_file_atomic((fs::path(root) / kLatestFile).string(), std::to_string(iteration) + "\n");
  fs::remove(fs::path(root) / kCommitMarkerFile, ec);
  if (ec) throw io_error("cannot remove: " + ec.message(), root + "/" + kCommitMarkerFile);
  return kept_aside;
}

std::vector<int64_t> prune_checkpoints(const std::string& root, int64_t keep_last) {
  std::vector<int64_t> removed;
  if (keep_last <= 0) return removed;
  const std::optional<int64_t> latest = read_latest(root);
  std::vector<int64_t> prunable;  // unpinned, at or below the latest, ascending
  for (const int64_t it : committed_iterations(root))
    if ((!latest || it <= *latest) && !pin_note((fs::path(root) / iteration_dir_name(it)).string()))
      prunable.push_back(it);
  if (prunable.size() <= static_cast<size_t>(keep_last)) return removed;
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < prunable.size(); ++i) {
    if (latest && prunable[i] == *latest) continue;  // never the one a resume would load
    const fs::path dir = fs::path(root) / iteration_dir_name(prunable[i]);
    const fs::path aside = fs::path(root) / (kDeletingPrefix + iteration_dir_name(prunable[i]));
    std::error_code ec;
    fs::rename(dir, aside, ec);
    if (ec) throw io_error("cannot move aside: " + ec.message(), dir.string());
    remove_tree(aside);
    removed.push_back(prunable[i]);
  }
  if (!removed.empty()) fsync_dir(root);
  return removed;
}

}  // namespace mtnlg
