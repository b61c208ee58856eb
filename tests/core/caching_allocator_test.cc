// CachingAllocator over a fake underlying allocator with a capacity, which counts its calls:
// exact-size reuse, the accounting, release-and-retry when the device is full, thread safety.
#include "core/caching_allocator.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace mtnlg {
namespace {

// malloc with a byte budget (nullptr past it), counting allocations and frees.
struct FakeDevice {
  size_t capacity = 1 << 20, used = 0;
  int allocs = 0, frees = 0;
  std::map<void*, size_t> live;
  std::mutex mu;

  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t n) -> void* {
          std::lock_guard<std::mutex> lock(mu);
          if (used + n > capacity) return nullptr;
          void* p = std::malloc(n);
          used += n;
          ++allocs;
          live[p] = n;
          return p;
        },
        [this](void* p) {
          std::lock_guard<std::mutex> lock(mu);
          used -= live.at(p);
          live.erase(p);
          ++frees;
          std::free(p);
        });
  }
};

TEST_CASE("caching allocator - a freed block of the same rounded size is handed out again") {
  FakeDevice dev;
  {
    CachingAllocator a = dev.make();
    CHECK(a.allocate(0) == nullptr);
    void* p = a.allocate(1000);  // rounds to 1024
    CHECK(a.reserved_bytes() == 1024);
    a.release(p, 1000);
    CHECK(a.cached_bytes() == 1024);
    CHECK(a.allocate(1024) == p);  // same rounded size: no new allocation
    CHECK(dev.allocs == 1);
    void* q = a.allocate(1025);  // 1536: another size, a new block
    CHECK(q != p);
    CHECK(dev.allocs == 2);
    CHECK(a.reserved_bytes() == 1024 + 1536);
    CHECK(a.cached_bytes() == 0);
    a.release(p, 1024);
    a.release(q, 1025);
    CHECK(a.peak_reserved_bytes() == 2560);
    a.empty_cache();
    CHECK(a.reserved_bytes() == 0);
    CHECK(dev.frees == 2);
    CHECK(a.raw_allocations() == 2);
    void* r = a.allocate(10);
    a.release(r, 10);
  }
  CHECK(dev.frees == 3);  // the destructor released the last cached block
  CHECK(dev.live.empty());
}

TEST_CASE("caching allocator - a full device releases the cache and retries once") {
  FakeDevice dev;
  dev.capacity = 4096;
  CachingAllocator a = dev.make();
  void* p = a.allocate(2048);
  void* q = a.allocate(2048);
  a.release(p, 2048);
  a.release(q, 2048);
  CHECK(a.cached_bytes() == 4096);
  // 3072 fits only once the two cached 2048-byte blocks go back.
  void* r = a.allocate(3072);
  REQUIRE(r != nullptr);
  CHECK(dev.frees == 2);
  CHECK(a.reserved_bytes() == 3072);
  CHECK(a.allocate(2048) == nullptr);  // 1024 left: out of memory, reported as nullptr
  a.release(r, 3072);
}

TEST_CASE("caching allocator - concurrent threads never share a live block") {
  FakeDevice dev;
  dev.capacity = size_t{64} << 20;
  CachingAllocator a = dev.make();
  std::mutex mu;
  std::set<void*> out;
  bool shared = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t n = 512 * static_cast<size_t>(1 + (i + t) % 5);
        void* p = a.allocate(n);
        {
          std::lock_guard<std::mutex> lock(mu);
          shared |= !out.insert(p).second;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          out.erase(p);
        }
        a.release(p, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK_FALSE(shared);
  CHECK(a.cached_bytes() == a.reserved_bytes());  // everything came back
  CHECK(a.raw_allocations() <= 4 * 5);            // at most one block per thread and size live
}

}  // namespace
}  // namespace mtnlg
