// MTNLG_HD marks per-element math shared by the CPU and CUDA kernels, so that CPU tests cover
// the exact arithmetic the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define MTNLG_HD __host__ __device__ __forceinline__
#else
#define MTNLG_HD inline
#endif

// Unroll the next loop on the device, where register arrays indexed by its counter must be
// indexed by constants to stay in registers (else they live in local memory); nothing on the host.
#if defined(__CUDA_ARCH__)
#define MTNLG_UNROLL _Pragma("unroll")
#else
#define MTNLG_UNROLL
#endif
