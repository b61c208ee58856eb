// MinHash signatures of documents' shingle sets (data/curate/shingles.h): for each of num_perm
// hash functions h_i, the smallest h_i over the document's shingles, as uint32. Two documents'
// signatures agree in a position with probability equal to the Jaccard similarity of their
// shingle sets. Two families:
//
//   datasketch  bit for bit Python datasketch's MinHash(num_perm, seed) fed the UTF-8 bytes of
//               each shingle: x = sha1_hash32 (the first 4 bytes of SHA-1, little-endian), and
//               h_i(x) = ((a_i * x + b_i) mod 2^64) mod (2^61 - 1), & 0xFFFFFFFF, in uint64 as
//               numpy wraps it, with (a_i, b_i) drawn as datasketch draws them:
//               numpy.random.RandomState(seed).randint(1, 2^61 - 1) then randint(0, 2^61 - 1),
//               per function in turn. An empty set keeps 0xFFFFFFFF everywhere (there is none:
//               an empty text is one empty shingle).
//   xxh3        the default, faster: x = the low 32 bits of XXH3-64 of the shingle, and
//               h_i(x) = ((A_i * x + B_i) mod 2^64) >> 32 with A_i, B_i random 64-bit
//               (Dietzfelbinger's multiply-add-shift, a strongly universal family on 32-bit
//               keys; the same estimator with other hash functions). A_i, B_i are numpy
//               RandomState(seed)'s 64-bit draws. Its products vectorise (no division and no
//               SHA-1), and bench/curate_bench.sh measures its Jaccard estimates against
//               datasketch's on the same pairs.
//
// A MinHasher is immutable after construction: signature() is safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/curate/shingles.h"

namespace mtnlg::curate {

enum class HashFamily { kDatasketch, kXxh3 };

// "datasketch" or "xxh3"; throws invalid_argument naming `flag` otherwise.
HashFamily parse_hash_family(const std::string& name, const std::string& flag);
const char* hash_family_name(HashFamily family);

class MinHasher {
 public:
  MinHasher(HashFamily family, int num_perm, uint32_t seed);

  int num_perm() const { return num_perm_; }
  HashFamily family() const { return family_; }

  // sig[num_perm] = the signature of the text's shingles.
  void signature(const NormalizedText& text, uint32_t* sig) const;

  // datasketch's sha1_hash32 of `bytes` (for tests).
  static uint32_t sha1_hash32(std::string_view bytes);
  // The family's parameters (for tests): datasketch's (a, b); xxh3's (A, B).
  const std::vector<uint64_t>& a() const { return a_; }
  const std::vector<uint64_t>& b() const { return b_; }

 private:
  // xxh3: the minima of functions [i0, i0 + kWidth) over the hashes xs[0, m).
  template <int kWidth>
  void group_min(const uint32_t* xs, int64_t m, int i0, uint32_t* sig) const;

  HashFamily family_;
  int num_perm_;
  std::vector<uint64_t> a_, b_;
  std::vector<uint32_t> a_lo_, a_hi_;     // xxh3: A's halves (the vectorised loop's operands)
  std::vector<uint64_t> b_even_, b_odd_;  // xxh3: B of the even and the odd functions
};

// Jaccard estimate of two signatures: the fraction of positions that agree.
double estimated_jaccard(const uint32_t* x, const uint32_t* y, int num_perm);

}  // namespace mtnlg::curate
