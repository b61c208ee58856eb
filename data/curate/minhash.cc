#include "data/curate/minhash.h"

#include <nettle/sha1.h>
#include <xxhash.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "data/numpy_random.h"

namespace mtnlg::curate {

namespace {

constexpr uint64_t kMersennePrime = (uint64_t{1} << 61) - 1;

// x mod (2^61 - 1) for any 64-bit x: fold the bits above 61 onto the low ones (2^61 = 1 mod p).
inline uint64_t mod_mersenne61(uint64_t x) {
  uint64_t r = (x & kMersennePrime) + (x >> 61);
  if (r >= kMersennePrime) r -= kMersennePrime;
  return r;
}

}  // namespace

HashFamily parse_hash_family(const std::string& name, const std::string& flag) {
  if (name == "datasketch") return HashFamily::kDatasketch;
  if (name == "xxh3") return HashFamily::kXxh3;
  throw invalid_argument(flag + ": unknown hash family '" + name +
                             "'; the fix: datasketch (bit for bit Python datasketch's MinHash) "
                             "or xxh3 (the faster default)",
                         flag);
}

const char* hash_family_name(HashFamily family) {
  return family == HashFamily::kDatasketch ? "datasketch" : "xxh3";
}

MinHasher::MinHasher(HashFamily family, int num_perm, uint32_t seed)
    : family_(family), num_perm_(num_perm) {
  if (num_perm < 1) throw invalid_argument("--num-perm must be at least 1", "--num-perm");
  NumpyRandomState rng(seed);
  a_.resize(static_cast<size_t>(num_perm));
  b_.resize(static_cast<size_t>(num_perm));
  for (int i = 0; i < num_perm; ++i) {
    if (family == HashFamily::kDatasketch) {
      // randint(1, p) then randint(0, p), dtype uint64: low + a masked draw in [0, high - 1 - low].
      a_[i] = 1 + rng.interval(kMersennePrime - 2);
      b_[i] = rng.interval(kMersennePrime - 1);
    } else {
      a_[i] = rng.next_uint64();
      b_[i] = rng.next_uint64();
    }
  }
  if (family == HashFamily::kXxh3) {
    a_lo_.resize(a_.size());
    a_hi_.resize(a_.size());
    b_even_.resize((a_.size() + 1) / 2);
    b_odd_.resize((a_.size() + 1) / 2);
    for (size_t i = 0; i < a_.size(); ++i) {
      a_lo_[i] = static_cast<uint32_t>(a_[i]);
      a_hi_[i] = static_cast<uint32_t>(a_[i] >> 32);
      (i % 2 == 0 ? b_even_ : b_odd_)[i / 2] = b_[i];
    }
  }
}

uint32_t MinHasher::sha1_hash32(std::string_view bytes) {
  sha1_ctx ctx;
  sha1_init(&ctx);
  sha1_update(&ctx, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
  uint8_t digest[SHA1_DIGEST_SIZE];
  sha1_digest(&ctx, SHA1_DIGEST_SIZE, digest);
  return static_cast<uint32_t>(digest[0]) | static_cast<uint32_t>(digest[1]) << 8 |
         static_cast<uint32_t>(digest[2]) << 16 | static_cast<uint32_t>(digest[3]) << 24;
}

template <int kWidth>
void MinHasher::group_min(const uint32_t* xs, int64_t m, int i0, uint32_t* sig) const {
  // (A x + B) mod 2^64 >> 32, with A = a_hi 2^32 + a_lo: the high word of a_lo x + B plus
  // a_hi x (mod 2^32).
#if defined(__AVX2__)
  if constexpr (kWidth == 8) {
    // vpmuludq multiplies the even dwords: functions 0, 2, 4, 6 from a_lo as loaded, 1, 3, 5, 7
    // from it shifted down; B's 64-bit lanes split the same way. The high dwords of the even
    // sums shifted down and of the odd sums in place blend into functions 0..7 in order.
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&a_lo_[i0]));
    const __m256i lo_odd = _mm256_srli_epi64(lo, 32);
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&a_hi_[i0]));
    const __m256i b_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&b_even_[i0 / 2]));
    const __m256i b_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&b_odd_[i0 / 2]));
    __m256i mn = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&sig[i0]));
    for (int64_t s = 0; s < m; ++s) {
      const __m256i x = _mm256_set1_epi32(static_cast<int>(xs[s]));
      const __m256i even = _mm256_add_epi64(_mm256_mul_epu32(lo, x), b_even);
      const __m256i odd = _mm256_add_epi64(_mm256_mul_epu32(lo_odd, x), b_odd);
      const __m256i high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
      mn = _mm256_min_epu32(mn, _mm256_add_epi32(high, _mm256_mullo_epi32(hi, x)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&sig[i0]), mn);
    return;
  }
#endif
  for (int j = 0; j < kWidth; ++j) {
    uint32_t mn = sig[i0 + j];
    for (int64_t s = 0; s < m; ++s) {
      const uint64_t t = static_cast<uint64_t>(a_lo_[i0 + j]) * xs[s] + b_[i0 + j];
      const uint32_t v = static_cast<uint32_t>(t >> 32) + a_hi_[i0 + j] * xs[s];
      mn = mn < v ? mn : v;
    }
    sig[i0 + j] = mn;
  }
}

void MinHasher::signature(const NormalizedText& text, uint32_t* sig) const {
  const int64_t n = text.shingles();
  const int p = num_perm_;
  std::fill(sig, sig + p, 0xFFFFFFFFu);
  if (family_ == HashFamily::kDatasketch) {
    const uint64_t* a = a_.data();
    const uint64_t* b = b_.data();
    for (int64_t s = 0; s < n; ++s) {
      const uint64_t x = sha1_hash32(text.shingle(s));
      for (int i = 0; i < p; ++i) {
        const auto v = static_cast<uint32_t>(mod_mersenne61(a[i] * x + b[i]));
        sig[i] = std::min(sig[i], v);
      }
    }
    return;
  }
  // Shingles in blocks: their hashes first, then each group of 8 functions runs over the whole
  // block with its parameters and minima in registers (not loaded and stored per shingle).
  constexpr int64_t kBlock = 256;
  constexpr int kGroup = 8;
  uint32_t xs[kBlock];
  for (int64_t s0 = 0; s0 < n; s0 += kBlock) {
    const int64_t m = std::min(kBlock, n - s0);
    for (int64_t s = 0; s < m; ++s) {
      const std::string_view sh = text.shingle(s0 + s);
      xs[s] = static_cast<uint32_t>(XXH3_64bits(sh.data(), sh.size()));
    }
    int i0 = 0;
    for (; i0 + kGroup <= p; i0 += kGroup) group_min<kGroup>(xs, m, i0, sig);
    for (; i0 < p; ++i0) group_min<1>(xs, m, i0, sig);
  }
}

double estimated_jaccard(const uint32_t* x, const uint32_t* y, int num_perm) {
  int same = 0;
  for (int i = 0; i < num_perm; ++i) same += x[i] == y[i];
  return static_cast<double>(same) / num_perm;
}

}  // namespace mtnlg::curate
