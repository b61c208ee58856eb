// CachingAllocator: keeps freed device blocks and hands them out again, as PyTorch's CUDA caching
// allocator does (without its block splitting). cudaMalloc and cudaFree cost tens of
// microseconds and cudaFree synchronizes the whole device, while the trainer frees and asks for
// the same sizes over and over (a batch-size change re-making scratch, evaluation buffers, the
// checkpoint and gradient staging), so the CUDA backend allocates through one of these.
//
// Policy: a request rounds up to kGranule bytes; a freed block goes to the cache, keyed by its
// rounded size, and a later request of exactly that size takes it (sizes recur: they are the
// model's shapes, so exact reuse wastes nothing, unlike best fit). When the underlying
// allocation fails, every cached block is released and it is tried once more; only then does the
// failure reach the caller. empty_cache() releases the cache at any time.
//
// Reuse is safe in stream order: the owner issues all work on the memory through one ordered
// queue (the CUDA backend's stream; communicators synchronize before returning), so work queued
// on a reused block runs after the work of its previous owner.
//
// What it reports: reserved_bytes(), the bytes held from the underlying allocator (live plus
// cached), and their peak. The Backend's live/peak (core/memory_counter.h) stay the tensors'
// own bytes, the figure the planner predicts; reserved exceeds it by the rounding and by the
// cache's blocks of sizes no longer asked for.
//
// Thread-safe (one mutex): blocks may be freed on any thread, as tensors are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace mtnlg {

class CachingAllocator {
 public:
  static constexpr size_t kGranule = 512;
  // raw_alloc returns a block of at least n bytes or nullptr when out of memory (it may throw
  // for other failures); raw_free returns one.
  CachingAllocator(std::function<void*(size_t)> raw_alloc, std::function<void(void*)> raw_free);
  ~CachingAllocator();  // releases the cache; blocks still out are the caller's to return first
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (nullptr for 0), or nullptr when the underlying allocator has
  // none even after the cache was released.
  void* allocate(size_t bytes);
  // Returns a block from allocate() with the same `bytes` to the cache.
  void release(void* p, size_t bytes);
  // Frees every cached block to the underlying allocator.
  void empty_cache();

  static size_t rounded(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }
  int64_t reserved_bytes() const;
  int64_t peak_reserved_bytes() const;
  int64_t cached_bytes() const;
  // Underlying allocations made so far (a warm cache makes none).
  int64_t raw_allocations() const;

 private:
  void empty_cache_locked();

  std::function<void*(size_t)> raw_alloc_;
  std::function<void(void*)> raw_free_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cache_;  // rounded size -> free block
  int64_t reserved_ = 0, peak_reserved_ = 0, cached_ = 0, raw_allocations_ = 0;
};

}  // namespace mtnlg
