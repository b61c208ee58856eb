#include "parallel/pmix_store.h"

#include <pmix.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "core/status.h"

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

// One PMIx_Get of `key` in `owner`'s data: its bytes, or nullopt while it is not there ("not
// there yet" in the forms servers use); anything else is a real failure.
std::optional<std::vector<uint8_t>> try_get(const pmix_proc_t& owner, const std::string& key,
                                            bool refresh) {
  // PMIX_TIMEOUT is whole seconds; 1 s keeps each call short so our own deadline holds.
  int server_timeout_s = 1;
  pmix_info_t info[2];
  PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &server_timeout_s, PMIX_INT);
  PMIX_INFO_LOAD(&info[1], PMIX_GET_REFRESH_CACHE, &refresh, PMIX_BOOL);
  pmix_value_t* val = nullptr;
  const pmix_status_t rc = PMIx_Get(&owner, key.c_str(), info, 2, &val);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  const std::string context = "key '" + key + "' of rank " + std::to_string(key_owner(key));
  if (rc != PMIX_SUCCESS) {
    if (rc != PMIX_ERR_NOT_FOUND && rc != PMIX_ERR_TIMEOUT && rc != PMIX_ERR_PROC_ENTRY_NOT_FOUND)
      check_pmix(rc, "PMIx_Get", context);
    return std::nullopt;
  }
  std::vector<uint8_t> out;
  const bool bytes = val->type == PMIX_BYTE_OBJECT;
  if (bytes && val->data.bo.size > 0) {
    const auto* p = reinterpret_cast<const uint8_t*>(val->data.bo.bytes);
    out.assign(p, p + val->data.bo.size);
  }
  PMIX_VALUE_RELEASE(val);
  if (!bytes) throw corruption("PMIx " + context + " is not a byte object", "pmix store");
  return out;
}

}  // namespace

void PmixStore::publish_failure(int64_t rank, const std::string& detail) noexcept {
  try {
    set(owned_key(kFailedKey, rank), std::vector<uint8_t>(detail.begin(), detail.end()));
  } catch (...) {  // best effort: the others still time out, naming the key
  }
}

std::vector<uint8_t> PmixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const int64_t owner_rank = key_owner(key);
  pmix_proc_t owner;
  PMIX_PROC_CONSTRUCT(&owner);
  PMIX_LOAD_PROCID(&owner, nspace_.c_str(), static_cast<pmix_rank_t>(owner_rank));
  const std::string failed = owned_key(kFailedKey, owner_rank);
  // The owner's failure (publish_failure) is looked for at most once a second: a rendezvous
  // that goes well never waits for it.
  auto next_failure_check = start + std::chrono::seconds(1);
  auto sleep = std::chrono::milliseconds(1);
  for (int attempt = 0;; ++attempt) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (auto value = try_get(owner, key, attempt > 0)) return std::move(*value);
    if (key != failed && Clock::now() >= next_failure_check) {
      if (const auto detail = try_get(owner, failed, true))
        throw io_error("rendezvous: rank " + std::to_string(owner_rank) +
                           " stopped with an error before it set key '" + key + "' (" +
                           std::string(detail->begin(), detail->end()) +
                           "; its own output says why): this rank stops too",
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
