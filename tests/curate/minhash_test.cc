// Shingles and MinHash signatures (data/curate/shingles.h, minhash.h). The datasketch values
// below were computed with Python (hashlib, numpy's RandomState, and
// tests/reference/curate_reference.py for the whole signature); SHA-1's are checked by hand
// against the published digests.
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/curate/lsh_params.h"
#include "data/curate/minhash.h"
#include "data/curate/shingles.h"

using namespace mtnlg;
using namespace mtnlg::curate;

namespace {

NormalizedText normalized(const std::string& s) {
  NormalizedText t;
  normalize_for_shingles(s, &t);
  return t;
}

std::vector<std::string> all_shingles(const std::string& s) {
  const NormalizedText t = normalized(s);
  std::vector<std::string> out;
  for (const std::string_view v : distinct_shingles(t)) out.emplace_back(v);
  return out;
}

}  // namespace

TEST_CASE("normalization is NFC, Python's lower() and whitespace runs to one space") {
  CHECK(normalized("Hello  World").text == "hello world");
  // Final sigma: Python lower-cases the last Σ of a word to ς.
  CHECK(normalized("ΣΑΣ ΟΔΟΣ").text == "σας οδος");
  // İ lower-cases to i + combining dot (two code points); NBSP and \x1c are whitespace to
  // Python's isspace; the ends are stripped.
  CHECK(normalized(" \xc4\xb0x\xc2\xa0Y \x1c z ").text == "i\xcc\x87x y z");
  // NFC composes e + U+0301 into é; U+2028 and U+3000 are whitespace.
  CHECK(normalized("e\xcc\x81\xe2\x80\xa8\xe3\x80\x80x").text == "\xc3\xa9 x");
  CHECK(normalized("").text.empty());
  CHECK(normalized("  \t\n").text.empty());
  CHECK(python_isspace(0x1f));
  CHECK(python_isspace(0x85));
  CHECK_FALSE(python_isspace(0x200b));  // zero width space is Cf, not whitespace
  CHECK_FALSE(python_isspace('a'));
}

TEST_CASE("shingles are distinct 5-grams of code points - a short text is one shingle") {
  CHECK(all_shingles("Hello  World") ==
        std::vector<std::string>{" worl", "ello ", "hello", "llo w", "lo wo", "o wor", "world"});
  CHECK(all_shingles("abc") == std::vector<std::string>{"abc"});
  CHECK(all_shingles("") == std::vector<std::string>{""});
  CHECK(all_shingles("aaaaaaa") == std::vector<std::string>{"aaaaa"});
  // Code points, not bytes: 4 Greek letters and a space make one 5-gram of 9 bytes.
  CHECK(all_shingles("σας ο").size() == 1);
  CHECK(all_shingles("σας ο")[0].size() == 9);
  const NormalizedText t = normalized("abcdef");
  CHECK(t.shingles() == 2);
  CHECK(t.shingle(1) == "bcdef");
}

TEST_CASE("a normalized text read back has the same code points and shingles") {
  for (const char* text : {"Hello  World", "σας ο Ünïcödé 𝔘 text", "", "abc"}) {
    const NormalizedText a = normalized(text);
    NormalizedText b;
    set_normalized_text(a.text, &b);
    CHECK(b.starts == a.starts);
    CHECK(distinct_shingles(b) == distinct_shingles(a));
  }
}

TEST_CASE("exact Jaccard of shingle sets") {
  const NormalizedText a = normalized("abcdefg"), b = normalized("abcdefh");
  // {abcde, bcdef, cdefg} and {abcde, bcdef, cdefh}: 2 shared of 4.
  CHECK(jaccard(distinct_shingles(a), distinct_shingles(b)) == Approx(0.5));
  CHECK(jaccard(distinct_shingles(a), distinct_shingles(a)) == 1.0);
  CHECK(jaccard({}, {}) == 1.0);
}

TEST_CASE("sha1_hash32 is the first 4 bytes of SHA-1, little-endian") {
  // SHA-1("") = da39a3ee..., SHA-1("hello") = aaf4c61d..., SHA-1("abcde") = 03de6c57...
  CHECK(MinHasher::sha1_hash32("") == 0xeea339dau);
  CHECK(MinHasher::sha1_hash32("hello") == 0x1dc6f4aau);
  CHECK(MinHasher::sha1_hash32("abcde") == 1466752515u);
}

TEST_CASE("datasketch's permutations are numpy RandomState's randint draws") {
  const MinHasher s1(HashFamily::kDatasketch, 2, 1);
  CHECK(s1.a() == std::vector<uint64_t>{775169054918279404ull, 2109959069025162ull});
  CHECK(s1.b() == std::vector<uint64_t>{1758426461858698312ull, 965365488286768773ull});
  const MinHasher s7(HashFamily::kDatasketch, 1, 7);
  CHECK(s7.a()[0] == 1407639518939636933ull);
  CHECK(s7.b()[0] == 551904368352831990ull);
}

TEST_CASE("a datasketch signature equals Python datasketch's") {
  const MinHasher h(HashFamily::kDatasketch, 4, 1);
  uint32_t sig[4];
  h.signature(normalized("Hello World"), sig);
  CHECK(std::vector<uint32_t>(sig, sig + 4) ==
        std::vector<uint32_t>{228630785u, 216833891u, 617530111u, 123214029u});
  // By hand from the definition: the first function's minimum over the 7 shingles.
  uint64_t want = 0xFFFFFFFFu;
  for (const std::string& s : all_shingles("Hello World")) {
    // numpy's uint64: the product and the sum wrap mod 2^64, then the Mersenne modulus.
    const uint64_t x = MinHasher::sha1_hash32(s);
    const uint64_t v = ((h.a()[0] * x + h.b()[0]) % ((uint64_t{1} << 61) - 1)) & 0xFFFFFFFFu;
    want = std::min(want, v);
  }
  CHECK(sig[0] == want);
}

TEST_CASE("the xxh3 family is multiply-add-shift of XXH3's low 32 bits - vector and tail alike") {
  // 12 functions: a vectorised group of 8 and 4 in the scalar tail; 300 shingles: two blocks.
  const MinHasher h(HashFamily::kXxh3, 12, 5);
  std::string text;
  for (int i = 0; i < 61; ++i) text.append("w").append(std::to_string(i * 7919 % 1000)).append(" ");
  const NormalizedText t = normalized(text);
  REQUIRE(t.shingles() > 256);
  std::vector<uint32_t> sig(12);
  h.signature(t, sig.data());
  for (int i = 0; i < 12; ++i) {
    uint32_t want = 0xFFFFFFFFu;
    for (int64_t s = 0; s < t.shingles(); ++s) {
      const std::string_view sh = t.shingle(s);
      const auto x = static_cast<uint32_t>(XXH3_64bits(sh.data(), sh.size()));
      const auto v = static_cast<uint32_t>((h.a()[i] * x + h.b()[i]) >> 32);
      want = std::min(want, v);
    }
    INFO("function " << i);
    CHECK(sig[i] == want);
  }
}

TEST_CASE("signatures agree where shingle sets agree - Jaccard estimates track the exact value") {
  for (const HashFamily f : {HashFamily::kDatasketch, HashFamily::kXxh3}) {
    INFO(hash_family_name(f));
    const MinHasher h(f, 256, 1);
    std::string a, b;
    for (int i = 0; i < 400; ++i) {
      const std::string n = std::to_string(i);
      a.append("word").append(n).append(" ");
      b.append(i % 10 == 0 ? "other" : "word").append(n).append(" ");
    }
    const NormalizedText na = normalized(a), nb = normalized(b);
    const double exact = jaccard(distinct_shingles(na), distinct_shingles(nb));
    std::vector<uint32_t> sa(256), sb(256), sc(256);
    h.signature(na, sa.data());
    h.signature(nb, sb.data());
    h.signature(normalized(a + "  "), sc.data());  // the same shingles
    CHECK(sa == sc);
    // 256 functions: the estimate's standard deviation is about 0.03.
    CHECK(std::abs(estimated_jaccard(sa.data(), sb.data(), 256) - exact) < 0.12);
  }
}

TEST_CASE("hash family names") {
  CHECK(parse_hash_family("datasketch", "--hash") == HashFamily::kDatasketch);
  CHECK(parse_hash_family("xxh3", "--hash") == HashFamily::kXxh3);
  CHECK_THROWS_WITH(parse_hash_family("md5", "--hash"), Catch::Contains("--hash"));
}

// datasketch's _optimal_param, against its integrals done exactly (rational arithmetic in
// tests/reference/curate_reference.py lsh-params): (5, 25) at 0.9 is also datasketch's own
// documented example.
TEST_CASE("LSH bands and rows are datasketch's optimal parameters") {
  struct Case {
    double threshold;
    int num_perm, bands, rows;
  };
  for (const Case c : {Case{0.9, 128, 5, 25}, Case{0.8, 128, 9, 13}, Case{0.7, 128, 14, 9},
                       Case{0.5, 128, 25, 5}, Case{0.8, 64, 5, 11}, Case{0.85, 128, 8, 16},
                       Case{0.6, 100, 16, 6}, Case{0.8, 256, 17, 15}}) {
    INFO("threshold " << c.threshold << " num_perm " << c.num_perm);
    const LshParams p = optimal_lsh_params(c.threshold, c.num_perm);
    CHECK(p.bands == c.bands);
    CHECK(p.rows == c.rows);
  }
  // The areas themselves: b = 1, r = 1 gives P(s) = s, so FP = t^2 / 2 and FN = (1 - t)^2 / 2.
  const auto [fp, fn] = lsh_error_areas(0.8, 1, 1);
  CHECK(fp == Approx(0.32).epsilon(1e-14));
  CHECK(fn == Approx(0.02).epsilon(1e-12));
  CHECK_THROWS_AS(optimal_lsh_params(1.5, 128), Error);
}
