#include "core/cpu/openblas_sgemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/env_choice.h"
#include "core/kernels/bf16_math.h"

namespace mtnlg::cpu {

namespace {

// OpenBLAS's x86-64 DYNAMIC_ARCH families (its driver/others/dynamic.c), the names its exported
// tables and kernels carry.
constexpr const char* kFamilies[] = {
    "HASWELL",     "ZEN",       "SKYLAKEX",     "COOPERLAKE",  "SAPPHIRERAPIDS",
    "SANDYBRIDGE", "NEHALEM",   "PENRYN",       "DUNNINGTON",  "CORE2",
    "ATOM",        "BULLDOZER", "PILEDRIVER",   "STEAMROLLER", "EXCAVATOR",
    "BARCELONA",   "BOBCAT",    "OPTERON_SSE3", "OPTERON",     "NANO",
    "PRESCOTT",    "NORTHWOOD", "BANIAS",       "COPPERMINE",  "KATMAI"};

float widen1(uint16_t b) {
  return bf16_to_f32(b);
}

#if defined(__AVX2__)
inline __m256 wide8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m128 wide4(const uint16_t* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
}
// r[i][j] <- r[j][i] for 8 registers of 8 floats.
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (h 0) and 4-7 (h 1)
    const int o = 4 * h;
    s[o + 0] = _mm256_shuffle_ps(t[o + 0], t[o + 2], 0x44);
    s[o + 1] = _mm256_shuffle_ps(t[o + 0], t[o + 2], 0xEE);
    s[o + 2] = _mm256_shuffle_ps(t[o + 1], t[o + 3], 0x44);
    s[o + 3] = _mm256_shuffle_ps(t[o + 1], t[o + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}
#endif

// One group of w rows starting at src (element (i, l) at src[i + l * ld] when rows_contiguous,
// else src[l + i * ld]) into dst, k-major: dst[l * w + i].
void pack_group(float* dst, const uint16_t* src, int64_t k, int64_t w, int64_t ld,
                bool rows_contiguous) {
  int64_t l = 0;
#if defined(__AVX2__)
  if (rows_contiguous && w == 8) {
    for (; l < k; ++l) _mm256_storeu_ps(dst + l * 8, wide8(src + l * ld));
  } else if (rows_contiguous && w == 4) {
    for (; l < k; ++l) _mm_storeu_ps(dst + l * 4, wide4(src + l * ld));
  } else if (!rows_contiguous && w == 8) {
    for (; l + 8 <= k; l += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = wide8(src + i * ld + l);
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (l + i) * 8, r[i]);
    }
  } else if (!rows_contiguous && w == 4) {
    for (; l + 4 <= k; l += 4) {
      __m128 r0 = wide4(src + l), r1 = wide4(src + ld + l), r2 = wide4(src + 2 * ld + l),
             r3 = wide4(src + 3 * ld + l);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(dst + l * 4, r0);
      _mm_storeu_ps(dst + l * 4 + 4, r1);
      _mm_storeu_ps(dst + l * 4 + 8, r2);
      _mm_storeu_ps(dst + l * 4 + 12, r3);
    }
  }
#endif
  for (; l < k; ++l)
    for (int64_t i = 0; i < w; ++i)
      dst[l * w + i] = widen1(rows_contiguous ? src[i + l * ld] : src[l + i * ld]);
}

// A thread's packing buffer of at least n floats, 4 KiB aligned (as OpenBLAS aligns its own), with
// a margin past the end for the kernel's prefetches.
float* buffer(std::vector<float>& v, int64_t n) {
  const size_t want = static_cast<size_t>(n) + 1024 + 256;
  if (v.size() < want) v.resize(want);
  auto* p = reinterpret_cast<char*>(v.data());
  p += (4096 - reinterpret_cast<uintptr_t>(p) % 4096) % 4096;
  return reinterpret_cast<float*>(p);
}

// The next block's length along k (block q) or the kernel's rows (block p), as OpenBLAS's level-3
// driver cuts them: one block while two or more are left; between one and two, half of what is
// left, rounded up to the unroll; less than one, all of it.
int64_t block_length(int64_t left, int64_t block, int64_t unroll) {
  if (left >= 2 * block) return block;
  if (left > block) return (left / 2 + unroll - 1) / unroll * unroll;
  return left;
}

}  // namespace

void OpenblasSgemm::pack(float* dst, const uint16_t* src, int64_t k, int64_t rows, int64_t ld,
                         bool rows_contiguous, int64_t unroll) {
  int64_t i0 = 0;
  const auto group = [&](int64_t w) {
    pack_group(dst + i0 * k, rows_contiguous ? src + i0 : src + i0 * ld, k, w, ld, rows_contiguous);
    i0 += w;
  };
  while (rows - i0 >= unroll) group(unroll);
  for (int64_t w = unroll / 2; w >= 1; w /= 2)
    if (rows - i0 >= w) group(w);
}

bool OpenblasSgemm::disabled_by_env() {
  return !env_choice("MTNLG_BF16_FALLBACK", "kernel", "widen");
}

const OpenblasSgemm& OpenblasSgemm::get() {
  static const OpenblasSgemm instance;
  return instance;
}

OpenblasSgemm::OpenblasSgemm() {
  ok_ = resolve();
}

bool OpenblasSgemm::resolve() {
  auto* const* table = static_cast<void* const*>(dlsym(RTLD_DEFAULT, "gotoblas"));
  if (table == nullptr) {
    what_ = "OpenBLAS exports no kernel table (not a DYNAMIC_ARCH build)";
    return false;
  }
  std::string family;
  for (const char* f : kFamilies)
    if (dlsym(RTLD_DEFAULT, (std::string("gotoblas_") + f).c_str()) == *table) family = f;
  if (family.empty()) {
    what_ = "OpenBLAS's kernel table is none of the families known here";
    return false;
  }
  const auto fn = [&](const char* name) {
    return dlsym(RTLD_DEFAULT, (std::string(name) + "_" + family).c_str());
  };
  kernel_ = reinterpret_cast<Kernel>(fn("sgemm_kernel"));
  beta_ = reinterpret_cast<Beta>(fn("sgemm_beta"));
  incopy_ = reinterpret_cast<Copy>(fn("sgemm_incopy"));
  itcopy_ = reinterpret_cast<Copy>(fn("sgemm_itcopy"));
  oncopy_ = reinterpret_cast<Copy>(fn("sgemm_oncopy"));
  otcopy_ = reinterpret_cast<Copy>(fn("sgemm_otcopy"));
  if (!kernel_ || !beta_ || !incopy_ || !itcopy_ || !oncopy_ || !otcopy_) {
    what_ = "OpenBLAS exports no sgemm kernel or copy routine for " + family;
    return false;
  }
  // The unrolls, read off the copy routines: the first group's width of a 2-deep block.
  const auto unroll_of = [](Copy copy) {
    std::vector<float> src(2 * 64), dst(2 * 64 + 64);
    for (int i = 0; i < 64; ++i)
      for (int l = 0; l < 2; ++l) src[l + i * 2] = static_cast<float>(i * 4 + l);
    copy(2, 64, src.data(), 2, dst.data());
    int64_t u = 0;
    while (u < 64 && static_cast<int>(dst[u]) % 4 == 0) ++u;
    return u;
  };
  unroll_m_ = unroll_of(incopy_);
  unroll_n_ = unroll_of(oncopy_);
  if (unroll_m_ < 1 || unroll_m_ >= 64 || unroll_n_ < 1 || unroll_n_ >= 64) {
    what_ = "OpenBLAS's " + family + " copy routines pack in a layout not known here";
    return false;
  }
  // Its blocking (GEMM_P, _Q, _R), from the table's parameters after the four ints that start it,
  // taken only where the unrolls beside them are the ones just read (the table's layout is
  // OpenBLAS's and varies with its build options); other blocks are as correct, only not
  // OpenBLAS's bits.
  const auto* params = static_cast<const int*>(*table);
  if (params[7] == unroll_m_ && params[8] == unroll_n_ && params[4] >= 16 && params[4] <= 16384 &&
      params[5] >= 16 && params[5] <= 16384 && params[6] >= 16) {
    p_ = params[4];
    q_ = params[5];
    r_ = params[6];
  }
  // The output columns one packed block of b spans: OpenBLAS's R, kept to 8 MiB of buffer.
  r_ = std::max<int64_t>(unroll_n_,
                         std::min<int64_t>(r_, (int64_t{2} << 20) / q_) / unroll_n_ * unroll_n_);
  std::string why;
  if (!check_packing(itcopy_, true, unroll_m_, why) ||
      !check_packing(incopy_, false, unroll_m_, why) ||
      !check_packing(otcopy_, true, unroll_n_, why) ||
      !check_packing(oncopy_, false, unroll_n_, why) || !check_product(why)) {
    what_ = "OpenBLAS's " + family + " sgemm kernel failed a check: " + why;
    return false;
  }
  what_ = family;
  return true;
}

bool OpenblasSgemm::check_packing(Copy copy, bool rows_contiguous, int64_t unroll,
                                  std::string& why) const {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0x3c00, 0x4100);  // bf16 values of about 0.008 to 8
  for (const auto& [k, rows] : {std::pair<int64_t, int64_t>{3, 19},
                                {9, 2 * unroll + 7},
                                {1, 1},
                                {16, unroll},
                                {13, unroll - 1 > 0 ? unroll - 1 : 1}}) {
    const int64_t ld = (rows_contiguous ? rows : k) + 3;
    const int64_t cols = rows_contiguous ? k : rows;
    std::vector<uint16_t> src(ld * cols);
    std::vector<float> src32(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      src[i] = static_cast<uint16_t>(bits(rng));
      src32[i] = widen1(src[i]);
    }
    std::vector<float> want(k * rows + 64, -1.0f), got(k * rows + 64, -1.0f);
    copy(k, rows, src32.data(), ld, want.data());
    pack(got.data(), src.data(), k, rows, ld, rows_contiguous, unroll);
    if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0) {
      why = "its packing of a " + std::to_string(rows) + " x " + std::to_string(k) +
            " block differs from ours";
      return false;
    }
  }
  return true;
}

bool OpenblasSgemm::check_product(std::string& why) const {
  // Every transpose, k over two blocks with a remainder, rows and columns with tails.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> bits(0x3c00, 0x4100);
  const int64_t m = 2 * unroll_n_ + 3, n = 3 * unroll_m_ + 5, k = 2 * q_ + 37;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      std::vector<uint16_t> a(m * k), b(k * n);
      for (auto& x : a) x = static_cast<uint16_t>(bits(rng) | (rng() & 1 ? 0x8000 : 0));
      for (auto& x : b) x = static_cast<uint16_t>(bits(rng) | (rng() & 1 ? 0x8000 : 0));
      std::vector<float> c(m * n, 1.0f);
      gemm(c.data(), n, a.data(), ta ? m : k, ta, b.data(), tb ? k : n, tb, m, n, k, 0.5f, 2.0f);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0, mag = 0;
          for (int64_t l = 0; l < k; ++l) {
            const double x = widen1(ta ? a[l * m + i] : a[i * k + l]);
            const double y = widen1(tb ? b[j * k + l] : b[l * n + j]);
            s += x * y;
            mag += std::fabs(x * y);
          }
          const double want = 0.5 * s + 2.0;
          if (std::fabs(c[i * n + j] - want) > 1e-5 * (mag + 2.0)) {
            why =
                "a product through it is off by " + std::to_string(std::fabs(c[i * n + j] - want));
            return false;
          }
        }
    }
  return true;
}

void OpenblasSgemm::gemm(float* c, int64_t ld_c, const uint16_t* a, int64_t ld_a, bool trans_a,
                         const uint16_t* b, int64_t ld_b, bool trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, float beta) const {
  if (m <= 0 || n <= 0) return;
  // OpenBLAS is column-major: c^T[n, m] = op(b)^T op(a)^T. Its "a" (the kernel's rows, unroll_m)
  // is our b: row i of it, column l, at b[i + l * ld_b] (rows contiguous) unless trans_b. Its "b"
  // (the kernel's columns, unroll_n) is our a: column j, row l, at a[j + l * ld_a] (columns
  // contiguous) when trans_a, else a[l + j * ld_a].
  const int64_t M = n, N = m;
  if (beta != 1.0f)
    beta_(M, N, 0, beta, nullptr, 0, nullptr, 0, c, ld_c);  // beta 0: zeros, whatever c held
  if (k <= 0 || alpha == 0.0f) return;
  thread_local std::vector<float> sa_store, sb_store;
  for (int64_t js = 0; js < N; js += r_) {
    const int64_t min_j = std::min(N - js, r_);
    for (int64_t ls = 0, min_l = 0; ls < k; ls += min_l) {
      min_l = block_length(k - ls, q_, unroll_m_);
      float* sb = buffer(sb_store, min_l * min_j);
      pack(sb, trans_a ? a + js + ls * ld_a : a + ls + js * ld_a, min_l, min_j, ld_a, trans_a,
           unroll_n_);
      for (int64_t is = 0, min_i = 0; is < M; is += min_i) {
        min_i = block_length(M - is, p_, unroll_m_);
        float* sa = buffer(sa_store, min_l * min_i);
        pack(sa, trans_b ? b + ls + is * ld_b : b + is + ls * ld_b, min_l, min_i, ld_b, !trans_b,
             unroll_m_);
        kernel_(min_i, min_j, min_l, alpha, sa, sb, c + is + js * ld_c, ld_c);
      }
    }
  }
}

}  // namespace mtnlg::cpu
