// The CPU kernels one core/cpu/ file calls in another (private to core/cpu/): templated on the
// element type T (float for training, double for gradient checks, Bf16 and F16 for mixed
// precision), raw row-major pointers, arguments in llm.c order (outputs, saved, inputs, weights,
// sizes). A family's other kernels are private to its <family>_cpu.cc, behind its CpuBackend::do_
// members (docs/backend.md). Arithmetic runs in acc_t<T> (float for Bf16 and F16): elements are
// widened on read and rounded once on write, and per-row statistics (LayerNorm mean/rstd) and
// parameter gradients are acc_t<T> arrays, so a bf16/fp16 model keeps fp32 statistics and fp32
// main gradients. Shapes and accumulate/overwrite rules are those of core/backend.h; the
// Backend's front validates tensors before calling in here.
//
// Threading: kernels open OpenMP parallel regions with the calling thread's OpenMP thread count
// (CpuBackend sets it) and call OpenBLAS single-threaded (see cpu_backend.cc for why).
// Determinism: every kernel partitions its work into pieces that do not depend on the thread
// count (fixed-size blocks, rows, column blocks) and combines partial sums in a fixed order,
// so results are bitwise identical for any thread count (gemm: only for a given count, see
// gemm_cpu.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/backend.h"
#include "core/kernels/bf16_math.h"
#include "core/kernels/dropout_math.h"
#include "core/rng.h"

// glibc's libmvec has SIMD versions of these (AVX2/AVX-512), but <math.h> only declares them
// under -ffast-math. Declaring them here lets `#pragma omp simd` loops call the vector versions
// without fast-math's other rewrites (libm.so links libmvec as needed).
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) float erff(float) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
}

namespace mtnlg::cpu {

// Elements per parallel work item of the elementwise kernels: fixed, so that which elements go
// through a vector body and which through a scalar tail never depends on the thread count.
inline constexpr int64_t kElemBlock = 8192;

// Runs fn(begin, end) over [0, n) in kElemBlock-sized pieces, in parallel.
template <typename F>
void for_blocks(int64_t n, F&& fn, int64_t block = kElemBlock) {
  const int64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (nb > 1)
  for (int64_t ib = 0; ib < nb; ++ib) fn(ib * block, std::min(n, (ib + 1) * block));
}

// fp32 views of bf16 data for the hot kernels. Per-element Bf16 conversions inside a kernel's
// loop keep GCC from vectorizing it (measured: GeLU 5x, LayerNorm 9x slower than fp32); these
// convert a block or row in one vectorized pass and let the fp32 loop run as it does for float.
// For float and double they are the pointer itself (no copy, same results bit for bit).
inline void widen(float* dst, const Bf16* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i].bits);
}
#if defined(__AVX2__)
// Eight floats rounded to bf16 as f32_to_bf16 rounds them (nearest even, a NaN kept quiet), each
// in the low half of its 32-bit lane. GCC vectorizes the scalar form poorly (0.15 ns an element
// against 0.03 to widen, measured): the narrowing after every bf16 GEMM, elementwise kernel and
// optimizer step went at a fifth of the widening's speed. tests/core/bf16_convert_test.cc checks
// every one of the 2^32 floats against f32_to_bf16_portable.
inline __m256i bf16_round_lanes(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i hi = _mm256_srli_epi32(b, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}
// dst[0:16] = lo and hi rounded to bf16. packus interleaves its two inputs by 128-bit lane; the
// permute puts them back in order.
inline void store_bf16x16(Bf16* dst, __m256 lo, __m256 hi) {
  const __m256i packed = _mm256_packus_epi32(bf16_round_lanes(lo), bf16_round_lanes(hi));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permute4x64_epi64(packed, 0xD8));
}
#endif
inline void narrow(Bf16* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 16 <= n; i += 16) {
    store_bf16x16(dst + i, _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
  }
#endif
  for (; i < n; ++i) dst[i].bits = f32_to_bf16(src[i]);
}
// dst = src * scale rounded to bf16 (the product rounded to fp32 first, as Bf16(src[i] * scale)).
inline void narrow_scaled(Bf16* dst, const float* src, float scale, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 16 <= n; i += 16) {
    store_bf16x16(dst + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), s),
                  _mm256_mul_ps(_mm256_loadu_ps(src + i + 8), s));
  }
#endif
  for (; i < n; ++i) dst[i].bits = f32_to_bf16(src[i] * scale);
}
// dst = src rounded to bf16 and widened back (fp32 holding bf16 values), as
// bf16_to_f32(f32_to_bf16(x)); dst may be src.
inline void round_to_bf16(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                  bf16_round_lanes(_mm256_loadu_ps(src + i)), 16)));
#endif
  for (; i < n; ++i) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
}
// fp16 through F16C (vcvtph2ps, vcvtps2ph: round to nearest even, as f32_to_f16), the scalar
// conversions for the tail and on CPUs without F16C. (The AVX-512 forms trip GCC 12's
// -Wmaybe-uninitialized inside its own header.)
inline void widen(float* dst, const F16* src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i].bits);
}
inline void narrow(F16* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i].bits = f32_to_f16(src[i]);
}

// Per-thread fp32 buffers for the views below, reused across calls (a row of logits is 200 KB:
// allocating it per row went through mmap and tripled the cross entropy's time). Views nest
// (at most three at once in a kernel) and are destroyed in reverse order, so a stack of slots
// suffices; a slot only grows.
class ScratchSlot {
 public:
  explicit ScratchSlot(int64_t n) {
    MTNLG_CHECK_MSG(depth() < kSlots, "more than " << kSlots << " nested bf16 views");
    std::vector<float>& v = slots()[depth()++];
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    data_ = v.data();
  }
  ~ScratchSlot() { --depth(); }
  ScratchSlot(const ScratchSlot&) = delete;
  ScratchSlot& operator=(const ScratchSlot&) = delete;
  float* data() const { return data_; }

 private:
  static constexpr int kSlots = 8;
  static std::vector<float>* slots() {
    thread_local std::vector<float> s[kSlots];
    return s;
  }
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  float* data_;
};

// Several buffers of one kernel call carved from one ScratchSlot of the calling thread, each
// 64-byte aligned within it; contents start undefined. Large per-call std::vectors are mapped
// and zero-filled anew by every call (glibc returns them to the kernel): in bf16 attention the
// page faults cost as much as the products.
class ScratchPieces {
 public:
  explicit ScratchPieces(std::initializer_list<int64_t> bytes)
      : offsets_(offsets_of(bytes)), slot_(offsets_.back() / 4 + 16) {}
  template <typename T>
  T* get(size_t i) const {
    auto* base = reinterpret_cast<char*>(slot_.data());
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    return reinterpret_cast<T*>(base + offsets_[i]);
  }

 private:
  // Each piece's start (rounded up to 64 bytes), then the total.
  static std::vector<int64_t> offsets_of(std::initializer_list<int64_t> bytes) {
    std::vector<int64_t> at{0};
    for (const int64_t b : bytes) at.push_back(at.back() + (b + 63) / 64 * 64);
    return at;
  }
  std::vector<int64_t> offsets_;
  ScratchSlot slot_;
};

// No buffer: float and double views are the data itself.
struct NoSlot {
  explicit NoSlot(int64_t) {}
};
template <typename T>
using SlotFor = std::conditional_t<std::is_same_v<T, acc_t<T>>, NoSlot, ScratchSlot>;

// Read-only acc_t<T> view of n elements at p.
template <typename T>
class Widened {
 public:
  Widened(const T* p, int64_t n) : slot_(n) {
    if constexpr (std::is_same_v<T, acc_t<T>>) {
      ptr_ = p;
    } else {
      widen(slot_.data(), p, n);
      ptr_ = slot_.data();
    }
  }
  const acc_t<T>* get() const { return ptr_; }

 private:
  SlotFor<T> slot_;
  const acc_t<T>* ptr_;
};

// Writable acc_t<T> view of n elements at p, rounded back into p when it goes out of scope.
// load: start from p's values (accumulating or in-place kernels), else uninitialised.
template <typename T>
class Narrowed {
 public:
  Narrowed(T* p, int64_t n, bool load) : p_(p), n_(n), slot_(n) {
    if constexpr (std::is_same_v<T, acc_t<T>>) {
      ptr_ = p;
    } else {
      if (load) widen(slot_.data(), p, n);
      ptr_ = slot_.data();
    }
  }
  ~Narrowed() {
    if constexpr (!std::is_same_v<T, acc_t<T>>) narrow(p_, slot_.data(), n_);
  }
  Narrowed(const Narrowed&) = delete;
  Narrowed& operator=(const Narrowed&) = delete;
  acc_t<T>* get() const { return ptr_; }

 private:
  T* p_;
  int64_t n_;
  SlotFor<T> slot_;
  acc_t<T>* ptr_;
};

// Dropout keep decisions walked in index order, one Philox block per four elements.
using KeepMask = kernels::KeepMask;

// ---- gemm_cpu.cc ----
// c[m, n] = alpha * op(a) @ op(b) + beta * c, row-major with leading dimensions; single-threaded
// (for callers that parallelise themselves, such as attention).
template <typename T>
void gemm_serial(T* c, int64_t ldc, const T* a, int64_t lda, bool trans_a, const T* b, int64_t ldb,
                 bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, T beta);
// Same on contiguous matrices, split across the OpenMP threads.
template <typename T>
void gemm(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n, int64_t k,
          T alpha, T beta);

// ---- elementwise_cpu.cc ----
template <typename T>
void fill(T* x, T value, int64_t n);
template <typename To, typename From>
void convert(To* dst, const From* src, int64_t n);
// float <-> bf16 / fp16 (T = Bf16 or F16; rounded to nearest even), vectorised by blocks.
template <typename T>
void narrow_all(T* dst, const float* src, int64_t n);
template <typename T>
void widen_all(float* dst, const T* src, int64_t n);

// ---- attention_cpu.cc ----
// out: [b, s, heads*hd], stats: [b, heads, s] (each row's log-sum-exp), qkv: [b, s, heads*3*hd]
template <typename T>
void attention_forward(T* out, acc_t<T>* stats, const T* qkv, int64_t b, int64_t s, int64_t heads,
                       int64_t hd, float dropout_p, RngStream rng);
// dqkv: [b, s, heads*3*hd] (overwritten), dout: [b, s, heads*hd]; the softmax recomputed from
// q, k and forward's stats
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const acc_t<T>* stats, int64_t b,
                        int64_t s, int64_t heads, int64_t hd, float dropout_p, RngStream rng);

}  // namespace mtnlg::cpu
