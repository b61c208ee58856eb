// Launch helpers shared by the CUDA kernels in core/cuda/: grid sizing for grid-stride loops and
// dispatch from a runtime DType to a compile-time element type. Header-only, stateless.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype_dispatch.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

constexpr int kCudaBlock = 256;

// Blocks for a grid-stride loop over n elements. Capped because a grid-stride loop needs no
// more than a few waves to fill any current GPU, and the cap keeps the count in range.
inline unsigned cuda_grid(int64_t n) {
  const int64_t blocks = (n + kCudaBlock - 1) / kCudaBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

// 16 bytes of elements (8 bf16/fp16, 4 f32, 2 f64): memory-bound kernels move one per lane per
// access, 512 bytes a warp instead of 64, when packed() says the layout allows it.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p) = v;
}

// Whether p sits on a 16-byte boundary: the one rule for a pack (or a cp.async) at p.
__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
// Whether every pointer does.
inline bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return true;
}

// Whether rows of `c` elements of T can be read in whole packs: c a multiple of the pack and
// every pointer on a 16-byte boundary.
template <typename T>
bool packed(int64_t c, std::initializer_list<const void*> ptrs) {
  return c % Pack<T>::kN == 0 && aligned16(ptrs);
}

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Element conversions between storage types, through the compute type: a bf16/fp16 source
// widens to float, a bf16/fp16 destination rounds from float once (f64 -> bf16 goes through
// f32, as CpuBackend::copy does).
template <typename D, typename S>
__device__ __forceinline__ D convert_element(S x) {
  return static_cast<D>(static_cast<acc_t<D>>(static_cast<acc_t<S>>(x)));
}

// Sum of v over a warp, in a fixed butterfly order (valid in every lane).
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
  for (int o = 16; o > 0; o /= 2) {
    const A w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

}  // namespace mtnlg
