#include "parallel/runtime.h"

#include <pmix.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "core/status.h"
#include "parallel/file_store.h"
#include "parallel/peer_watch.h"
#include "parallel/pmix_store.h"

namespace mtnlg {

namespace {

// Job facts arrive with the job (no server round trip) but servers type them differently
// (uint16 local rank, uint32 sizes): accept any integer.
int64_t get_int(const pmix_proc_t& proc, const char* key) {
  pmix_value_t* val = nullptr;
  check_pmix(PMIx_Get(&proc, key, nullptr, 0, &val), "PMIx_Get", std::string("key ") + key);
  int64_t out = 0;
  bool ok = true;
  switch (val->type) {
    case PMIX_UINT8:
      out = val->data.uint8;
      break;
    case PMIX_UINT16:
      out = val->data.uint16;
      break;
    case PMIX_UINT32:
      out = val->data.uint32;
      break;
    case PMIX_UINT64:
      out = static_cast<int64_t>(val->data.uint64);
      break;
    case PMIX_INT:
      out = val->data.integer;
      break;
    case PMIX_INT16:
      out = val->data.int16;
      break;
    case PMIX_INT32:
      out = val->data.int32;
      break;
    case PMIX_INT64:
      out = val->data.int64;
      break;
    case PMIX_PROC_RANK:
      out = val->data.rank;
      break;
    default:
      ok = false;
  }
  PMIX_VALUE_RELEASE(val);
  if (!ok) throw corruption(std::string("PMIx key ") + key + " is not an integer", "runtime");
  return out;
}

// A whole non-negative decimal integer from the environment; `fallback` when unset.
int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (*v == 0 || *end != 0 || errno != 0 || n < 0)
    throw invalid_argument(
        std::string(name) + "=" + v +
            " is not a non-negative integer (the environment launch without PMIx; see "
            "docs/launching.md, \"Launching without PMIx\")",
        name);
  return n;
}

// The environment launch (no PMIx): MTNLG_RANK, MTNLG_WORLD_SIZE and MTNLG_STORE_DIR, with
// MTNLG_LOCAL_RANK, MTNLG_LOCAL_WORLD_SIZE and MTNLG_NODE.
void init_from_env(Runtime& rt) {
  rt.world = env_int("MTNLG_WORLD_SIZE", 1);
  rt.rank = env_int("MTNLG_RANK", -1);
  if (rt.world < 1)
    throw invalid_argument("MTNLG_WORLD_SIZE=0: a job has at least one rank", "MTNLG_WORLD_SIZE");
  if (rt.rank < 0 || rt.rank >= rt.world)
    throw invalid_argument(
        std::getenv("MTNLG_RANK") == nullptr
            ? "MTNLG_WORLD_SIZE is set but MTNLG_RANK is not: set each process's rank (0 to "
              "MTNLG_WORLD_SIZE - 1), or unset both to run one process"
            : "MTNLG_RANK=" + std::to_string(rt.rank) + " is outside a world of " +
                  std::to_string(rt.world) + " (MTNLG_WORLD_SIZE)",
        "MTNLG_RANK");
  rt.local_world = env_int("MTNLG_LOCAL_WORLD_SIZE", rt.world);
  rt.local_rank = env_int("MTNLG_LOCAL_RANK", rt.rank);
  rt.node = env_int("MTNLG_NODE", 0);
  if (rt.local_world < 1 || rt.local_rank >= rt.local_world)
    throw invalid_argument(
        "MTNLG_LOCAL_RANK=" + std::to_string(rt.local_rank) +
            " is outside MTNLG_LOCAL_WORLD_SIZE=" + std::to_string(rt.local_world),
        "MTNLG_LOCAL_RANK");
  const char* dir = std::getenv("MTNLG_STORE_DIR");
  if (dir == nullptr || *dir == 0)
    throw invalid_argument(
        "MTNLG_WORLD_SIZE is set but MTNLG_STORE_DIR is not: the ranks meet through files in "
        "that directory (empty, one per job, shared by every node)",
        "MTNLG_STORE_DIR");
  rt.store = std::make_unique<FileStore>(dir);
}

}  // namespace

Runtime Runtime::init() {
  Runtime rt;
  if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) {
    if (std::getenv("MTNLG_WORLD_SIZE") != nullptr) {
      init_from_env(rt);
      rt.env_launch_ = true;
      if (rt.world > 1) publish_process(*rt.store, rt.rank);
      return rt;
    }
    rt.store = std::make_unique<MemoryStore>();
    return rt;
  }
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  check_pmix(PMIx_Init(&me, nullptr, 0), "PMIx_Init", "runtime");
  rt.pmix_initialized_ = true;  // from here on ~Runtime finalizes, even if a Get below throws
  pmix_proc_t job;
  PMIX_PROC_CONSTRUCT(&job);
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  rt.rank = me.rank;
  rt.world = get_int(job, PMIX_JOB_SIZE);
  rt.local_rank = get_int(me, PMIX_LOCAL_RANK);
  rt.local_world = get_int(job, PMIX_LOCAL_SIZE);
  rt.node = get_int(me, PMIX_NODEID);
  rt.store = std::make_unique<PmixStore>(me.nspace, rt.rank);
  if (rt.world > 1) publish_process(*rt.store, rt.rank);
  return rt;
}

Runtime::~Runtime() {
  if (store != nullptr && world > 1 && std::uncaught_exceptions() > uncaught_at_start_) {
    store->publish_failure(rank, this_process());
  }
  finalize();
}

Runtime::Runtime(Runtime&& other) noexcept
    : rank(other.rank),
      world(other.world),
      local_rank(other.local_rank),
      local_world(other.local_world),
      node(other.node),
      store(std::move(other.store)),
      pmix_initialized_(std::exchange(other.pmix_initialized_, false)),
      env_launch_(other.env_launch_) {}

Runtime& Runtime::operator=(Runtime&& other) noexcept {
  if (this != &other) {
    finalize();
    rank = other.rank;
    world = other.world;
    local_rank = other.local_rank;
    local_world = other.local_world;
    node = other.node;
    store = std::move(other.store);
    pmix_initialized_ = std::exchange(other.pmix_initialized_, false);
    env_launch_ = other.env_launch_;
  }
  return *this;
}

void Runtime::finalize() noexcept {
  store.reset();
  // No barrier in PMIx_Finalize (PMIx's default): a rank that fails must be able to leave alone.
  if (pmix_initialized_) PMIx_Finalize(nullptr, 0);
  pmix_initialized_ = false;
}

std::string Runtime::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world) + " (local " +
         std::to_string(local_rank) + " of " + std::to_string(local_world) + ", node " +
         std::to_string(node) + "), " +
         (pmix_initialized_ ? "PMIx"
          : env_launch_     ? "environment launch (MTNLG_STORE_DIR)"
                            : "single process");
}

}  // namespace mtnlg
