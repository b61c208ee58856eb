#include "parallel/runtime.h"

#include <pmix.h>

#include <cstdlib>
#include <utility>

#include "core/status.h"
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

}  // namespace

Runtime Runtime::init() {
  Runtime rt;
  if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) {
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
  return rt;
}

Runtime::~Runtime() {
  finalize();
}

Runtime::Runtime(Runtime&& other) noexcept
    : rank(other.rank),
      world(other.world),
      local_rank(other.local_rank),
      local_world(other.local_world),
      node(other.node),
      store(std::move(other.store)),
      pmix_initialized_(std::exchange(other.pmix_initialized_, false)) {}

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
         std::to_string(node) + "), " + (pmix_initialized_ ? "PMIx" : "single process");
}

}  // namespace mtnlg
