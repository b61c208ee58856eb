// Small host-to-device copies that wait for nothing: the bytes are copied on the host into one of
// a ring of pinned buffers, and the device copies them from there in stream order. A copy from
// pageable host memory must wait for the stream before returning (the caller may free or change
// its memory at once), which drained the GPU's queue twice a micro-batch (the token and target
// ids). A slot is reused once its last copy has run (an event): the host runs at most kSlots
// copies ahead. Larger copies (weights from a checkpoint) keep the waiting path: the ring stays
// small (kSlots x kMaxBytes of pinned memory at most, allocated as needed).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace mtnlg {

class PinnedStaging {
 public:
  static constexpr size_t kMaxBytes = size_t{1} << 20;
  static constexpr int kSlots = 8;
  // A slot's buffer: the request rounded up to 64 KiB, so that a micro-batch's ids fit the
  // first buffer and later ones rarely grow it.
  static constexpr size_t capacity_for(size_t bytes) {
    constexpr size_t kGrain = size_t{64} << 10;
    return (bytes + kGrain - 1) / kGrain * kGrain;
  }

  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  // Waits for the slots' copies before their buffers are freed.
  ~PinnedStaging();

  // dst (device) = src[0, bytes) (host), bytes <= kMaxBytes, queued on `stream`; src may be
  // changed or freed on return.
  void upload(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  // Uploads that found their slot's last copy still queued and waited for it.
  int64_t waits() const { return waits_; }

 private:
  struct HostDeleter {
    void operator()(void* p) const { (void)cudaFreeHost(p); }
  };
  struct EventDeleter {
    void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
  };
  struct Slot {
    std::unique_ptr<void, HostDeleter> host;
    size_t capacity = 0;
    std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter> done;  // its last copy's
  };
  std::array<Slot, kSlots> slots_;
  int next_ = 0;
  int64_t waits_ = 0;
};

}  // namespace mtnlg
