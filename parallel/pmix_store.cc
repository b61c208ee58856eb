#include "parallel/pmix_store.h"

#include <pmix.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/status.h"
#include "parallel/peer_watch.h"

namespace mtnlg {

void check_pmix(int status, const char* call, const std::string& context) {
  if (status == PMIX_SUCCESS) return;
  throw io_error(std::string(call) + " failed: " + PMIx_Error_string(status) +
                     " (is the launcher's PMIx server alive? run under mpirun or srun --mpi=pmix)",
                 context);
}

void PmixStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  if (key.size() > PMIX_MAX_KEYLEN)
    throw invalid_argument("store key '" + key + "' is longer than PMIx's " +
                               std::to_string(PMIX_MAX_KEYLEN) + " characters",
                           "pmix store");
  if (key_owner(key) != rank_)
    throw invalid_argument("store key '" + key + "' names rank " + std::to_string(key_owner(key)) +
                               " as its setter, but rank " + std::to_string(rank_) +
                               " sets it: build keys with owned_key()",
                           "pmix store");
  pmix_byte_object_t bo;
  bo.bytes = reinterpret_cast<char*>(const_cast<uint8_t*>(value.data()));
  bo.size = value.size();
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_BYTE_OBJECT;
  v.data.bo = bo;  // borrowed: PMIx_Put copies the value
  check_pmix(PMIx_Put(PMIX_GLOBAL, key.c_str(), &v), "PMIx_Put", "key '" + key + "'");
  check_pmix(PMIx_Commit(), "PMIx_Commit", "key '" + key + "'");
}

namespace {

// One read's state, shared by the reader and PMIx's callback: the reader may stop waiting, and
// the callback may come later or never. Open MPI's server holds a read of an absent key until
// the key's process commits it or PMIX_TIMEOUT passes, but when that process dies meanwhile it
// never answers (seen with mpirun --enable-recovery: PMIx_Get blocked for good). Reading through
// PMIx_Get_nb with our own deadline keeps every read bounded; an abandoned read costs this
// small object.
struct GetState {
  GetState(const pmix_proc_t& proc, std::string k, int timeout_s, bool refresh)
      : owner(proc), key(std::move(k)), server_timeout_s(timeout_s), refresh_cache(refresh) {
    PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &server_timeout_s, PMIX_INT);
    PMIX_INFO_LOAD(&info[1], PMIX_GET_REFRESH_CACHE, &refresh_cache, PMIX_BOOL);
  }
  ~GetState() {
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
  }
  // The read's arguments, kept until the callback: PMIx may still use them after we stop waiting.
  pmix_proc_t owner;
  std::string key;
  int server_timeout_s;
  bool refresh_cache;
  pmix_info_t info[2];
  std::mutex mutex;
  std::condition_variable answered;
  bool done = false;  // guarded by mutex, as the three below
  pmix_status_t status = PMIX_ERR_TIMEOUT;
  bool bytes = false;
  std::vector<uint8_t> value;
};

// PMIx's callback for PMIx_Get_nb: cbdata is a heap shared_ptr<GetState>, ours from here on.
void on_get(pmix_status_t status, pmix_value_t* kv, void* cbdata) {
  const std::unique_ptr<std::shared_ptr<GetState>> holder(
      static_cast<std::shared_ptr<GetState>*>(cbdata));
  GetState& state = **holder;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.status = status;
    if (status == PMIX_SUCCESS && kv != nullptr) {
      state.bytes = kv->type == PMIX_BYTE_OBJECT;
      if (state.bytes && kv->data.bo.size > 0) {
        const auto* p = reinterpret_cast<const uint8_t*>(kv->data.bo.bytes);
        state.value.assign(p, p + kv->data.bo.size);
      }
    }
    state.done = true;
  }
  state.answered.notify_all();
}

// One read of `key` in `owner`'s data: its bytes, or nullopt while it is not there ("not there
// yet" in the forms servers use, or no answer within PMIX_TIMEOUT and a second more); anything
// else is a real failure.
std::optional<std::vector<uint8_t>> pmix_try_get(const pmix_proc_t& owner, const std::string& key,
                                                 bool refresh) {
  // PMIX_TIMEOUT is whole seconds; 1 s keeps each call short so our own deadline holds.
  constexpr int kServerTimeoutS = 1;
  auto state = std::make_shared<GetState>(owner, key, kServerTimeoutS, refresh);
  auto holder = std::make_unique<std::shared_ptr<GetState>>(state);
  // Handed to the callback before the call: PMIx may answer from within it. A call that fails
  // never calls back, and the holder is ours again.
  std::shared_ptr<GetState>* cbdata = holder.release();
  const pmix_status_t rc =
      PMIx_Get_nb(&state->owner, state->key.c_str(), state->info, 2, on_get, cbdata);
  const std::string context = "key '" + key + "' of rank " + std::to_string(key_owner(key));
  pmix_status_t status = rc;
  std::vector<uint8_t> out;
  bool bytes = false;
  if (rc != PMIX_SUCCESS) {
    holder.reset(cbdata);
  } else {
    std::unique_lock<std::mutex> lock(state->mutex);
    if (!state->answered.wait_for(lock, std::chrono::seconds(kServerTimeoutS + 1),
                                  [&] { return state->done; }))
      return std::nullopt;  // abandoned: the callback, if it ever comes, frees its holder
    status = state->status;
    bytes = state->bytes;
    out = std::move(state->value);
  }
  if (status != PMIX_SUCCESS) {
    if (status != PMIX_ERR_NOT_FOUND && status != PMIX_ERR_TIMEOUT &&
        status != PMIX_ERR_PROC_ENTRY_NOT_FOUND)
      check_pmix(status, "PMIx_Get", context);
    return std::nullopt;
  }
  if (!bytes) throw corruption("PMIx " + context + " is not a byte object", "pmix store");
  return out;
}

pmix_proc_t proc_of(const std::string& nspace, int64_t rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), static_cast<pmix_rank_t>(rank));
  return proc;
}

}  // namespace

std::optional<std::vector<uint8_t>> PmixStore::try_get(const std::string& key) {
  return pmix_try_get(proc_of(nspace_, key_owner(key)), key, true);
}

std::vector<uint8_t> PmixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const int64_t owner_rank = key_owner(key);
  const pmix_proc_t owner = proc_of(nspace_, owner_rank);
  const std::string failed = owned_key(kFailedKey, owner_rank);
  RankSigns owner_signs(owner_rank);
  // The owner's signs of having stopped (its failure, publish_failure; its process on this host
  // gone) are looked for at most once a second: a rendezvous that goes well never waits for them.
  auto next_failure_check = start + std::chrono::seconds(1);
  auto sleep = std::chrono::milliseconds(1);
  for (int attempt = 0;; ++attempt) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (auto value = pmix_try_get(owner, key, attempt > 0)) return std::move(*value);
    if (key != failed && Clock::now() >= next_failure_check) {
      if (const auto gone = owner_signs.read(*this))
        throw io_error("rendezvous: rank " + std::to_string(owner_rank) + " " + *gone +
                           " before it set key '" + key + "': this rank stops too",
                       "pmix store");
      next_failure_check = Clock::now() + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::min(sleep, std::max(left, std::chrono::milliseconds(0))));
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  throw io_error("rendezvous timed out after " + std::to_string(waited) + " ms waiting for key '" +
                     key + "' from rank " + std::to_string(owner_rank) +
                     ": that rank did not start, died, or is in another group; raise "
                     "parallel.timeout_s if startup is slow",
                 "pmix store");
}

}  // namespace mtnlg
