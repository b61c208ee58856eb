// The executor the thread programs of core/kernels/ ask for (flash2_forward.h lists what W
// provides; softmax_rows.h needs thread() and shfl_xor only): the hardware's barrier, shuffles,
// cp.async, ldmatrix and mma.sync. tests/core/simt_emulator.h is the other executor, on the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/kernels/bf16_math.h"

namespace mtnlg {

struct WarpExec {
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ void sync() { __syncthreads(); }
  __device__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
  __device__ uint32_t shfl_xor(uint32_t v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  template <typename T>
  __device__ void cp_async16(T* dst, const T* src) {
    const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
  }
  __device__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
  template <int N>
  __device__ void cp_async_wait() {
    // "memory": no shared-memory read may move above the wait.
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  }
  template <bool kTrans, int kCount, typename T>
  __device__ void ldmatrix(uint32_t (&r)[kCount], const T* row) {
    static_assert(sizeof(T) == 2 && (kCount == 2 || kCount == 4), "m8n8 b16, two or four");
    const auto addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    // volatile: shared memory changes between the barriers, never the address.
    if constexpr (kCount == 4 && !kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    } else if constexpr (kCount == 4) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(addr));
    } else if constexpr (!kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                   : "=r"(r[0]), "=r"(r[1])
                   : "r"(addr));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                   : "=r"(r[0]), "=r"(r[1])
                   : "r"(addr));
    }
  }
  template <typename T>
  __device__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<T, Bf16>) {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
      asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
#else
    // Never launched below sm_80 (flash2_attention_applies); compiled for the host pass only.
    (void)c;
    (void)a;
    (void)b;
#endif
  }
};

}  // namespace mtnlg
