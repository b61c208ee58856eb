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

std::vector<std::string> prepare_root(const std::string& root,
                                      std::optional<int64_t>* rolled_forward) {
  std::error_code ec;
  if (fs::exists(root, ec) && !fs::is_directory(root, ec))
    throw io_error(
        "checkpoint.dir is a file, not a directory; set checkpoint.dir to a directory "
        "(it is created if missing)",
        root);
  fs::create_directories(root, ec);
  if (ec) throw io_error("cannot create checkpoint.dir: " + ec.message(), root);
  std::vector<std::string> removed;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    const bool temp = name.size() > 4 && name.compare(name.size() - 4, 4, kTempSuffix) == 0 &&
                      (name.rfind(kIterPrefix, 0) == 0 || name.rfind(kLatestFile, 0) == 0);
    if (temp || name.rfind(kDeletingPrefix, 0) == 0) removed.push_back(e.path().string());
  }
  if (ec) throw io_error("cannot list: " + ec.message(), root);
  for (const std::string& p : removed) remove_tree(p);
  if (rolled_forward != nullptr) rolled_forward->reset();
  const std::vector<int64_t> committed = committed_iterations(root);
  const std::optional<int64_t> latest = read_latest(root);
  if (!committed.empty() && (!latest || *latest < committed.back())) {
    // The last save renamed its directory but died before the latest file: it is complete.
    write_file_atomic((fs::path(root) / kLatestFile).string(),
                      std::to_string(committed.back()) + "\n");
    if (rolled_forward != nullptr) *rolled_forward = committed.back();
  }
  if (!removed.empty()) fsync_dir(root);
  return removed;
}

void commit_checkpoint(const std::string& root, int64_t iteration) {
  const fs::path tmp = temp_dir_path(root, iteration);
  const fs::path final_dir = fs::path(root) / iteration_dir_name(iteration);
  fsync_dir(tmp.string());
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    // An older save of this iteration (a run resumed from before it): out of the way first.
    const fs::path aside = fs::path(root) / (kDeletingPrefix + iteration_dir_name(iteration));
    remove_tree(aside);
    fs::rename(final_dir, aside, ec);
    if (ec) throw io_error("cannot move aside: " + ec.message(), final_dir.string());
    remove_tree(aside);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw io_error("cannot rename " + tmp.string() + ": " + ec.message(), final_dir.string());
  fsync_dir(root);
  write_file_atomic((fs::path(root) / kLatestFile).string(), std::to_string(iteration) + "\n");
}

std::vector<int64_t> prune_checkpoints(const std::string& root, int64_t keep_last) {
  std::vector<int64_t> removed;
  if (keep_last <= 0) return removed;
  const std::vector<int64_t> committed = committed_iterations(root);
  const std::optional<int64_t> latest = read_latest(root);
  if (committed.size() <= static_cast<size_t>(keep_last)) return removed;
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < committed.size(); ++i) {
    if (latest && committed[i] == *latest) continue;  // never the one a resume would load
    const fs::path dir = fs::path(root) / iteration_dir_name(committed[i]);
    const fs::path aside = fs::path(root) / (kDeletingPrefix + iteration_dir_name(committed[i]));
    std::error_code ec;
    fs::rename(dir, aside, ec);
    if (ec) throw io_error("cannot move aside: " + ec.message(), dir.string());
    remove_tree(aside);
    removed.push_back(committed[i]);
  }
  if (!removed.empty()) fsync_dir(root);
  return removed;
}

}  // namespace mtnlg
