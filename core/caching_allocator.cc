#include "core/caching_allocator.h"

#include <algorithm>
#include <utility>

namespace mtnlg {

CachingAllocator::CachingAllocator(std::function<void*(size_t)> raw_alloc,
                                   std::function<void(void*)> raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cache_.find(size); it != cache_.end()) {
    void* p = it->second;
    cache_.erase(it);
    cached_ -= static_cast<int64_t>(size);
    return p;
  }
  void* p = raw_alloc_(size);
  if (p == nullptr && !cache_.empty()) {
    empty_cache_locked();  // blocks of other sizes may make room
    p = raw_alloc_(size);
  }
  if (p == nullptr) return nullptr;
  ++raw_allocations_;
  reserved_ += static_cast<int64_t>(size);
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  return p;
}

void CachingAllocator::release(void* p, size_t bytes) {
  if (p == nullptr) return;
  const size_t size = rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(size, p);
  cached_ += static_cast<int64_t>(size);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  for (const auto& [size, p] : cache_) {
    raw_free_(p);
    reserved_ -= static_cast<int64_t>(size);
  }
  cache_.clear();
  cached_ = 0;
}

int64_t CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}
int64_t CachingAllocator::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_reserved_;
}
int64_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}
int64_t CachingAllocator::raw_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return raw_allocations_;
}

}  // namespace mtnlg
