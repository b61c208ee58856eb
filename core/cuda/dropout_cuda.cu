// Dropout on CUDA. The keep mask is never stored: element i keeps when
// dropout_keep(rng, i, p) (core/rng.h, Philox), the same draw the CPU kernel makes, so forward
// and backward (and CPU and GPU) agree bit for bit on which elements survive.
#include <cstdint>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/dropout_math.h"
#include "core/rng.h"

namespace mtnlg {

namespace {

// out may alias in. Used for forward and backward alike: both are x * keep / (1 - p). One
// thread per Philox block of the stream's elements [0, n): element i is word (offset + i) & 3 of
// block (offset + i) >> 2 (core/rng.h rng_bits), so one draw serves four elements.
// The residual's sum as add_cuda rounds it, one rounded addition: for f32 and f64 the dropped
// value's product could otherwise be contracted into it (an fma), which the two calls (the
// product stored, then added) never do.
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}

// With `res` (dropout_add), out = res + the dropped element, rounded as add_cuda rounds: the
// dropped value is first rounded to T, as dropout_forward stores it.
template <typename T>
__device__ __forceinline__ T with_residual(T d, const T* res, int64_t i) {
  using A = acc_t<T>;
  return res ? static_cast<T>(add_rn(static_cast<A>(res[i]), static_cast<A>(d))) : d;
}
template <typename T>
__device__ __forceinline__ T dropped(const T x, bool keep, acc_t<T> scale, const T* res,
                                     int64_t i) {
  using A = acc_t<T>;
  return with_residual(static_cast<T>(keep ? static_cast<A>(x) * scale : A(0)), res, i);
}

template <typename T>
__global__ void dropout_kernel(T* out, const T* in, const T* res, float p, acc_t<T> scale,
                               RngStream rng, int64_t n) {
  using A = acc_t<T>;
  const uint64_t hi = stream_word(rng);  // a captured step's base read once
  const uint64_t first = rng.offset >> 2;
  const auto blocks =
      static_cast<int64_t>(((rng.offset + static_cast<uint64_t>(n) - 1) >> 2) - first + 1);
  for (int64_t q = first_index(); q < blocks; q += grid_stride()) {
    const uint64_t block = first + static_cast<uint64_t>(q);
    const Philox4 bits = philox4x32_10(rng.seed, hi, block);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int64_t i = static_cast<int64_t>(4 * block + static_cast<uint64_t>(w) - rng.offset);
      if (i < 0 || i >= n) continue;
      out[i] = dropped(in[i], kernels::dropout_keep_bits(bits.v[w], p), scale, res, i);
    }
  }
}

// dropout_kernel on whole packs (16 bytes, one load and one store a lane), for a stream offset
// that is a multiple of 4 and 16-byte aligned tensors: a pack of kN elements then starts a
// Philox block, and spans kN / 4 of them (two for bf16/fp16, one for f32). The tail past the
// last whole pack goes element by element. The same draws and arithmetic per element as
// dropout_kernel, so the same bits.
template <typename T>
__global__ void dropout_packed_kernel(T* out, const T* in, const T* res, float p, acc_t<T> scale,
                                      RngStream rng, int64_t n) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  static_assert(kN % 4 == 0, "a pack holds whole Philox blocks");
  const uint64_t hi = stream_word(rng);  // a captured step's base read once
  const uint64_t first = rng.offset >> 2;
  const int64_t whole = n / kN;
  for (int64_t q = first_index(); q < whole; q += grid_stride()) {
    const Pack<T> x = load_pack(in + q * kN);
    Pack<T> r;
    const Pack<T> base = res ? load_pack(res + q * kN) : x;
#pragma unroll
    for (int blk = 0; blk < kN / 4; ++blk) {
      const Philox4 bits =
          philox4x32_10(rng.seed, hi, first + static_cast<uint64_t>(q * (kN / 4) + blk));
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int k = 4 * blk + w;
        const T d = static_cast<T>(
            kernels::dropout_keep_bits(bits.v[w], p) ? static_cast<A>(x.v[k]) * scale : A(0));
        r.v[k] = res ? static_cast<T>(add_rn(static_cast<A>(base.v[k]), static_cast<A>(d))) : d;
      }
    }
    store_pack(out + q * kN, r);
  }
  for (int64_t i = whole * kN + first_index(); i < n; i += grid_stride()) {
    kernels::KeepMask mask(rng, p);  // the tail: fewer than kN elements, a draw each
    out[i] = dropped(in[i], mask.keep(static_cast<uint64_t>(i)), scale, res, i);
  }
}

// out = dropout(in), or with `res` res + dropout(in) (p > 0 then: p == 0 is the caller's add).
void dropout_apply(Tensor& out, const Tensor& in, const Tensor* res, double p, RngStream rng,
                   cudaStream_t stream, const char* op) {
  MTNLG_CHECK_MSG(p >= 0.0 && p < 1.0, op << ": dropout probability " << p);
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, out.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* r = res ? res->data_as<T>() : nullptr;
    if (p == 0.0) {  // identity: no draws needed
      if (out.data() != in.data()) {
        CUDA_CHECK(
            cudaMemcpyAsync(out.data(), in.data(), out.nbytes(), cudaMemcpyDeviceToDevice, stream));
      }
      return;
    }
    const auto scale = kernels::dropout_scale(static_cast<acc_t<T>>(static_cast<float>(p)));
    if constexpr (Pack<T>::kN % 4 == 0) {
      if (rng.offset % 4 == 0 && aligned16({out.data(), in.data(), r})) {
        const int64_t threads = n / Pack<T>::kN + n % Pack<T>::kN;
        dropout_packed_kernel<<<cuda_grid(threads), kCudaBlock, 0, stream>>>(
            out.data_as<T>(), in.data_as<T>(), r, static_cast<float>(p), scale, rng, n);
        CUDA_CHECK(cudaGetLastError());
        return;
      }
    }
    dropout_kernel<<<cuda_grid((n + 3) / 4 + 1), kCudaBlock, 0, stream>>>(
        out.data_as<T>(), in.data_as<T>(), r, static_cast<float>(p), scale, rng, n);
    CUDA_CHECK(cudaGetLastError());
  });
}

// out = in * keep / (1 - p), keep = dropout_keep(rng, i) (core/rng.h), the CPU's stream.
void dropout_forward_cuda(Tensor& out, const Tensor& in, double p, RngStream rng,
                          cudaStream_t stream) {
  dropout_apply(out, in, nullptr, p, rng, stream, "dropout_forward");
}

void dropout_backward_cuda(Tensor& din, const Tensor& dout, double p, RngStream rng,
                           cudaStream_t stream) {
  dropout_apply(din, dout, nullptr, p, rng, stream, "dropout_backward");
}

// y = residual + dropout_forward(x) in one pass, the bits of the two calls (y may alias x).
void dropout_add_cuda(Tensor& y, const Tensor& x, const Tensor& residual, double p, RngStream rng,
                      cudaStream_t stream) {
  if (p == 0.0) return add_cuda(y, residual, x, stream);
  dropout_apply(y, x, &residual, p, rng, stream, "dropout_add");
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) {
  dropout_forward_cuda(out, in, p, rng, stream());
}

void CudaBackend::do_dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) {
  dropout_backward_cuda(din, dout, p, rng, stream());
}

void CudaBackend::do_dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                                 RngStream rng) {
  dropout_add_cuda(y, x, residual, p, rng, stream());
}

}  // namespace mtnlg
