// FP8 on CUDA: the casts (Backend::abs_max, Backend::fp8_cast) and the GEMM's operands packed as
// FP8 bytes for cuBLASLt (Backend::gemm_fp8, core/cuda/gemm_epilogue.h).
//
// The casts are precision: fp8's on a GPU, the
// same values as the CPU's (core/cpu/fp8_cpu.cc): each element scaled and rounded by
// fp8_round_bits (core/kernels/fp8_math.h), stored as f32 or bf16 (both exact for every FP8
// value). The maximum is taken on the magnitudes' float bits (non-negative floats order as
// unsigned integers, NaN above infinity), per block then by atomicMax into one word: a maximum
// is order-free, so the result does not depend on the grid. Both return it to the host (one
// 4-byte read back and a synchronization, as sum_squares); fp8_cast_accumulate leaves it in the
// caller's word on the device (delayed scaling reads a step's words once).
#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_fp8.h>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/fp8_math.h"

namespace mtnlg {

namespace {

static_assert(kCudaBlock % 32 == 0, "whole warps");

template <typename T>
__device__ __forceinline__ uint32_t abs_bits(T v) {
  return __float_as_uint(static_cast<float>(static_cast<acc_t<T>>(v))) & 0x7FFFFFFFu;
}

// The block's largest of m into *out.
__device__ __forceinline__ void block_max_into(unsigned* out, unsigned m) {
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ unsigned warp_max[kCudaBlock / 32];
  if ((threadIdx.x & 31u) == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned b = 0;
    for (int w = 0; w < kCudaBlock / 32; ++w) b = max(b, warp_max[w]);
    atomicMax(out, b);
  }
}

template <typename T>
__global__ void abs_max_kernel(unsigned* out, const T* x, int64_t n) {
  unsigned m = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) m = max(m, abs_bits(x[i]));
  block_max_into(out, m);
}

// out may alias in: each element is read (and its magnitude taken) before it is written.
template <Fp8Format kFormat, typename T, typename Out>
__global__ void fp8_cast_kernel(unsigned* amax, Out* out, const T* in, int64_t n, float scale) {
  unsigned m = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const T v = in[i];
    m = max(m, abs_bits(v));
    const float q = fp8_round_bits(static_cast<float>(static_cast<acc_t<T>>(v)) * scale, kFormat);
    out[i] = static_cast<Out>(q);  // exact: every FP8 value is a bf16 (and an f32) value
  }
  block_max_into(amax, m);
}

double amax_to_host(const unsigned* word, cudaStream_t stream) {
  unsigned bits = 0;
  CUDA_CHECK(cudaMemcpyAsync(&bits, word, sizeof bits, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return fp8_amax_from_bits(bits);
}

template <typename T, typename Out>
void launch_cast(unsigned* amax, Out* out, const T* in, int64_t n, float scale, Fp8Format format,
                 cudaStream_t stream) {
  if (format == Fp8Format::kE4M3) {
    fp8_cast_kernel<Fp8Format::kE4M3>
        <<<cuda_grid(n), kCudaBlock, 0, stream>>>(amax, out, in, n, scale);
  } else {
    fp8_cast_kernel<Fp8Format::kE5M2>
        <<<cuda_grid(n), kCudaBlock, 0, stream>>>(amax, out, in, n, scale);
  }
}

// out = the FP8 bytes of in [rows, cols] (values already on the grid, so the conversion is
// exact), as [rows, cols] or transposed, [cols, rows]: 32 x 32 tiles through shared memory, so
// that both the reads and the writes are coalesced. Block (32, 8).
template <typename T>
__global__ void fp8_pack_kernel(uint8_t* out, const T* in, int64_t rows, int64_t cols,
                                bool transpose, __nv_fp8_interpretation_t kind) {
  __shared__ uint8_t tile[32][33];
  const int64_t r0 = int64_t{blockIdx.y} * 32, c0 = int64_t{blockIdx.x} * 32;
  for (unsigned dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    const int64_t r = r0 + dy, c = c0 + threadIdx.x;
    if (r < rows && c < cols)
      tile[dy][threadIdx.x] = __nv_cvt_float_to_fp8(
          static_cast<float>(static_cast<acc_t<T>>(in[r * cols + c])), __NV_SATFINITE, kind);
  }
  __syncthreads();
  for (unsigned dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    if (!transpose) {
      const int64_t r = r0 + dy, c = c0 + threadIdx.x;
      if (r < rows && c < cols) out[r * cols + c] = tile[dy][threadIdx.x];
    } else {
      const int64_t c = c0 + dy, r = r0 + threadIdx.x;  // out's row c, column r
      if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][dy];
    }
  }
}

}  // namespace

void fp8_pack_cuda(uint8_t* out, const Tensor& in, bool transpose, Fp8Format f,
                   cudaStream_t stream) {
  const int64_t rows = in.dim(0), cols = in.dim(1);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
  const __nv_fp8_interpretation_t kind = f == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  if (in.dtype() == DType::kBF16) {
    fp8_pack_kernel<<<grid, dim3(32, 8), 0, stream>>>(out, in.data_as<Bf16>(), rows, cols,
                                                      transpose, kind);
  } else {
    fp8_pack_kernel<<<grid, dim3(32, 8), 0, stream>>>(out, in.data_as<float>(), rows, cols,
                                                      transpose, kind);
  }
  CUDA_CHECK(cudaGetLastError());
}

// The word both use is the backend's amax_word (its fixed scratch): each call synchronizes before
// returning, so no two uses overlap on the stream; the wait also settles the id checks.
double CudaBackend::do_abs_max(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  unsigned* word = amax_word();
  CUDA_CHECK(cudaMemsetAsync(word, 0, sizeof(unsigned), stream()));
  dispatch_dtype(Device::kCUDA, x.dtype(), "abs_max", [&](auto tag) {
    using T = decltype(tag);
    abs_max_kernel<<<cuda_grid(n), kCudaBlock, 0, stream()>>>(word, x.data_as<T>(), n);
  });
  CUDA_CHECK(cudaGetLastError());
  return with_id_checks([&] { return amax_to_host(word, stream()); });
}

namespace {

// The cast of in into out, its amax raised into *word (on the stream, nothing waited for).
void cast_into(unsigned* word, Tensor& out, const Tensor& in, double scale, Fp8Format format,
               cudaStream_t stream) {
  const int64_t n = in.numel();
  const auto s = static_cast<float>(scale);
  dispatch_dtype(Device::kCUDA, in.dtype(), "fp8_cast", [&](auto tag) {
    using T = decltype(tag);
    if (out.dtype() == DType::kBF16) {
      launch_cast(word, out.data_as<Bf16>(), in.data_as<T>(), n, s, format, stream);
    } else {
      launch_cast(word, out.data_as<float>(), in.data_as<T>(), n, s, format, stream);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

double CudaBackend::do_fp8_cast(Tensor& out, const Tensor& in, double scale, Fp8Format format) {
  if (in.numel() == 0) return 0.0;
  unsigned* word = amax_word();
  CUDA_CHECK(cudaMemsetAsync(word, 0, sizeof(unsigned), stream()));
  cast_into(word, out, in, scale, format, stream());
  return with_id_checks([&] { return amax_to_host(word, stream()); });
}

void CudaBackend::do_fp8_cast_accumulate(Tensor& out, const Tensor& in, double scale,
                                         Fp8Format format, Tensor& amax_bits) {
  if (in.numel() == 0) return;
  cast_into(reinterpret_cast<unsigned*>(amax_bits.data_as<int32_t>()), out, in, scale, format,
            stream());
}

}  // namespace mtnlg
