// MTNLG_HD marks per-element math shared by the CPU and CUDA kernels, so that CPU tests cover
// the exact arithmetic the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define MTNLG_HD __host__ __device__ __forceinline__
#else
#define MTNLG_HD inline
#endif
