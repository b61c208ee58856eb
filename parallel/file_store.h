// FileStore: a Store in a directory every rank can reach (a shared file system across nodes,
// any local directory within one), for jobs started without a PMIx launcher (Runtime's
// environment launch: MTNLG_STORE_DIR).
//
// Each key is one file, named by the key with every byte outside [A-Za-z0-9._@-] written as %XX.
// set() writes a temporary file and links it into place, so a reader sees the whole value or no
// file; link() refuses an existing name, and since keys are set once per job (store.h), a key
// that is already there means the directory holds an earlier job's keys: that is an error naming
// the directory (use an empty one per job), not a silent read of stale addresses. get() polls
// for the file (1 ms, backing off to 20 ms). A launcher of its own may not stop the other ranks
// when one fails: a rank that stops with an error leaves the key "failed@<rank>"
// (publish_failure, from Runtime), and get() of a key that rank sets stops with an io_error
// naming it (it looks at once, then every 100 ms); so it does when that rank's process, on this
// host, is gone (RankSigns, parallel/peer_watch.h). The waiting rank then stops too, and so on,
// each in milliseconds rather than parallel.timeout_s.
//
// Thread safety: every call may come from any thread; the object holds no mutable state beyond
// Store's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/store.h"

namespace mtnlg {

class FileStore final : public Store {
 public:
  // `dir` must exist and be writable; throws io_error naming it otherwise.
  explicit FileStore(std::string dir);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::vector<uint8_t>> try_get(const std::string& key) override;

  // The file that holds `key` (for tests and error messages).
  std::string path_of(const std::string& key) const;

 private:
  std::optional<std::vector<uint8_t>> read_if_present(const std::string& path) const;

  std::string dir_;
};

}  // namespace mtnlg
