// Store: the rendezvous key-value interface ranks use to find each other (as gloo's
// rendezvous::Store): set a key, get it (waiting until some rank sets it), wait for keys.
//
// Key convention. Some stores keep each value with the process that set it (PmixStore: a value
// lives in its setter's PMIx data and a reader must name that process), so a key says who sets
// it: a key ending in "@<global rank>" is set by that rank, any other key by rank 0. owned_key()
// builds such keys; PrefixStore keeps the suffix at the end. Stores that do not care (MemoryStore)
// treat keys as plain strings. A key is set once: keys are never overwritten or deleted, so a
// group created again on one store takes a fresh prefix (next_use()).
//
// Implementations here:
//   MemoryStore  threads of one process (unit tests where ranks are threads, single-process runs)
//   PrefixStore  a namespace over another store ("gloo/tensor.0x2/" + key)
//   PmixStore    processes under a PMIx server (parallel/pmix_store.h)
//
// Thread safety: every Store is safe to call from several threads at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mtnlg {

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Waits until `key` is present and returns its value; after `timeout` throws io_error naming
  // the key and the time waited.
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Waits until every key is present (same error as get). The default gets each key in turn.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // The value of `key` if it is there now, else nullopt, without waiting for it (PmixStore asks
  // its server once, which can take up to a second).
  virtual std::optional<std::vector<uint8_t>> try_get(const std::string& key) = 0;

  // Says that global rank `rank` stopped with an error (Runtime says it when an exception leaves
  // it; `detail`: where it ran, "on host H, pid P"), so that a rank waiting for one of its keys
  // stops at once with an error naming it, and so on down the ranks waiting for that one, instead
  // of each waiting out its timeout; and so that a collective stalled on it can name it
  // (PeerWatch). Sets owned_key(kFailedKey, rank). Best effort; never throws.
  virtual void publish_failure(int64_t rank, const std::string& detail) noexcept;
  // What `rank` said with publish_failure, or nullopt while it said nothing; no waiting (as
  // try_get).
  virtual std::optional<std::string> failure_of(int64_t rank);
  static constexpr const char* kFailedKey = "failed";

  // How many times this process called next_use(name) before: a local count, never shared.
  // Lets a group that is created again (same name and members) use fresh keys: its members
  // create groups in the same order, so each member counts the same (name it per member when
  // ranks are threads sharing one store).
  int64_t next_use(const std::string& name);

 private:
  std::mutex uses_mutex_;
  std::map<std::string, int64_t> uses_;  // guarded by uses_mutex_
};

// "<name>@<setter_rank>": a key that says which global rank sets it (see the key convention).
std::string owned_key(const std::string& name, int64_t setter_rank);
// The global rank that sets `key`: the number after a final '@', else 0.
int64_t key_owner(const std::string& key);

// Prefixes every key with "<prefix>/"; does not own `base`, which must outlive it.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, Store& base) : prefix_(std::move(prefix) + "/"), base_(base) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::optional<std::vector<uint8_t>> try_get(const std::string& key) override;
  // A rank's failure is the job's, not the namespace's: both go to `base` unprefixed.
  void publish_failure(int64_t rank, const std::string& detail) noexcept override;
  std::optional<std::string> failure_of(int64_t rank) override;

 private:
  std::string prefix_;
  Store& base_;
};

// An in-process map guarded by a mutex; get() and wait() block on a condition variable.
class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::optional<std::vector<uint8_t>> try_get(const std::string& key) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<uint8_t>> values_;  // guarded by mutex_
};

}  // namespace mtnlg
