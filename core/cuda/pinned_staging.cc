#include "core/cuda/pinned_staging.h"

#include <cstring>

#include "core/cuda/cuda_check.h"
#include "core/status.h"

namespace mtnlg {

PinnedStaging::~PinnedStaging() {
  for (Slot& s : slots_) {
    if (s.done) (void)cudaEventSynchronize(s.done.get());  // a destructor reports nothing
  }
}

void PinnedStaging::upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  MTNLG_CHECK_MSG(bytes <= kMaxBytes,
                  "PinnedStaging::upload: " << bytes << " bytes (at most " << kMaxBytes << ")");
  Slot& s = slots_[static_cast<size_t>(next_)];
  next_ = (next_ + 1) % kSlots;
  if (!s.done) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s.done.reset(e);
  } else {
    const cudaError_t ready = cudaEventQuery(s.done.get());
    if (ready == cudaErrorNotReady) {
      ++waits_;
      CUDA_CHECK(cudaEventSynchronize(s.done.get()));  // the slot's last copy reads its buffer
    } else {
      CUDA_CHECK(ready);
    }
  }
  if (s.capacity < bytes) {
    s.host.reset();
    s.capacity = 0;
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, capacity_for(bytes)));
    s.host.reset(p);
    s.capacity = capacity_for(bytes);
  }
  std::memcpy(s.host.get(), src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, s.host.get(), bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(s.done.get(), stream));
}

}  // namespace mtnlg
