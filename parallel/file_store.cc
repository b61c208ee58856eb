#include "parallel/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "core/status.h"
#include "parallel/peer_watch.h"

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() {
  return std::strerror(errno);
}

// Temporary names differ per process, thread and moment; creation is exclusive anyway.
std::string temp_suffix() {
  return ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "." +
         std::to_string(Clock::now().time_since_epoch().count());
}

bool write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  struct stat st {};
  if (dir_.empty() || ::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      ::access(dir_.c_str(), W_OK | X_OK) != 0)
    throw io_error("rendezvous directory '" + dir_ +
                       "' is not a writable directory: create an empty directory that every "
                       "rank can reach (a shared file system across nodes) and set "
                       "MTNLG_STORE_DIR to it",
                   "MTNLG_STORE_DIR");
}

std::string FileStore::path_of(const std::string& key) const {
  static const char* hex = "0123456789ABCDEF";
  std::string name;
  for (const unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '@' || c == '-') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  // A leading '.' would collide with the temporary files' names.
  if (!name.empty() && name[0] == '.') name = "%2E" + name.substr(1);
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string path = path_of(key);
  std::string temp;
  int fd = -1;
  do {
    temp = dir_ + "/." + path.substr(dir_.size() + 1) + temp_suffix();
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EEXIST);
  if (fd < 0)
    throw io_error("rendezvous: cannot create '" + temp + "': " + errno_text(), "MTNLG_STORE_DIR");
  const bool written = write_all(fd, value.data(), value.size());
  const int saved = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    errno = written ? errno : saved;
    const std::string why = errno_text();
    ::unlink(temp.c_str());
    throw io_error("rendezvous: cannot write '" + temp + "': " + why, "MTNLG_STORE_DIR");
  }
  // link() publishes the whole file at once and refuses a name that exists.
  const int linked = ::link(temp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (linked != 0) {
    errno = link_errno;
    if (link_errno == EEXIST)
      throw io_error("rendezvous directory '" + dir_ + "' already holds key '" + key +
                         "' (keys are set once per job): it holds an earlier job's keys; give "
                         "every job an empty MTNLG_STORE_DIR (e.g. mktemp -d, or one named for "
                         "the job id)",
                     "MTNLG_STORE_DIR");
    throw io_error("rendezvous: cannot link '" + path + "': " + errno_text(), "MTNLG_STORE_DIR");
  }
}

// The file's bytes; nullopt when it is not there (yet).
std::optional<std::vector<uint8_t>> FileStore::read_if_present(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw io_error("rendezvous: cannot open '" + path + "': " + errno_text(), "MTNLG_STORE_DIR");
  }
  std::vector<uint8_t> value;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw io_error("rendezvous: cannot read '" + path + "': " + why, "MTNLG_STORE_DIR");
    }
    if (r == 0) break;
    value.insert(value.end(), buf, buf + r);
  }
  ::close(fd);
  return value;
}

std::optional<std::vector<uint8_t>> FileStore::try_get(const std::string& key) {
  return read_if_present(path_of(key));
}

std::vector<uint8_t> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string path = path_of(key);
  const int64_t owner = key_owner(key);
  const std::string failed_key = owned_key(kFailedKey, owner);
  RankSigns owner_signs(owner);
  const auto start = Clock::now();
  // The owner's signs of having stopped (its failure key; its process, on this host, gone) are
  // looked for at most every 100 ms, and first at once: on a shared file system every waiting
  // rank's polls are metadata requests.
  auto next_failure_check = start;
  auto pause = std::chrono::microseconds(1000);
  for (;;) {
    if (auto value = read_if_present(path)) return std::move(*value);
    if (key != failed_key && Clock::now() >= next_failure_check) {
      next_failure_check = Clock::now() + std::chrono::milliseconds(100);
      if (const auto gone = owner_signs.read(*this))
        throw io_error("rendezvous: rank " + std::to_string(owner) + " " + *gone +
                           " before it set key '" + key + "': this rank stops too",
                       "store");
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (waited >= timeout)
      throw io_error("rendezvous timed out after " + std::to_string(waited.count()) +
                         " ms waiting for key '" + key + "' (file '" + path +
                         "'): a rank did not start, died, is in another job, or cannot see this "
                         "directory (MTNLG_STORE_DIR must be shared by every node); raise "
                         "parallel.timeout_s if startup is slow",
                     "store");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace mtnlg
