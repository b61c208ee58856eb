// Python's random module as lm-evaluation-harness draws its few-shot examples with, against
// Python itself (/usr/bin/python3 run by the test; skipped where it is missing): random(),
// getrandbits, sample() on both sides of its change of algorithm, the harness's sampler with and
// without the evaluated document removed, over one stream that advances across documents.
#include "data/tasks/fewshot_sampler.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"
#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

TEST_CASE("random() and getrandbits are Python's, seed for seed") {
  const std::vector<uint64_t> seeds = {0, 1, 1234, (uint64_t{1} << 40) + 5,
                                       18446744073709551615ull};
  std::string program = "import random\n";
  for (const uint64_t s : seeds)
    program += "r = random.Random(" + std::to_string(s) +
               ")\nprint(' '.join(r.random().hex() for _ in range(300)))\n"
               "print(' '.join(str(r.getrandbits(k)) for k in list(range(1, 65)) * 3))\n";
  const std::vector<std::string> lines = [&] {
    std::vector<std::string> l;
    std::istringstream in(python(program));
    for (std::string s; std::getline(in, s);) l.push_back(s);
    return l;
  }();
  REQUIRE(lines.size() == 2 * seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) {
    INFO("seed " << seeds[i]);
    PythonRandom r(seeds[i]);
    const auto floats = words(lines[2 * i]);
    REQUIRE(floats.size() == 300);
    for (const std::string& f : floats) {
      const double want = std::strtod(f.c_str(), nullptr);  // Python's float.hex: exact
      REQUIRE(r.random() == want);
    }
    const auto bits = words(lines[2 * i + 1]);
    REQUIRE(bits.size() == 192);
    for (size_t j = 0; j < bits.size(); ++j)
      REQUIRE(r.getrandbits(static_cast<int>(j % 64) + 1) == std::stoull(bits[j]));
  }
}

TEST_CASE("sample() is Python's on both sides of its change of algorithm") {
  // One stream for all draws, as a task's sampler: n up to 5000, k 0 to n, across the set size
  // of 21 (+ 4^ceil(log4(3k)) for k > 5) where Python changes from a pool to a set.
  std::vector<std::pair<int64_t, int64_t>> draws;
  for (int64_t n : {1, 2, 5, 6, 7, 20, 21, 22, 23, 30, 37, 38, 50, 85, 86, 100, 1000, 5000})
    for (int64_t k : {0, 1, 2, 5, 6, 7, 10, 20, 21, 40, 200, 1000})
      if (k <= n) draws.emplace_back(n, k);
  std::string program = "import random\nr = random.Random(1234)\n";
  for (const auto& [n, k] : draws)
    program += "print(' '.join(map(str, r.sample(range(" + std::to_string(n) + "), " +
               std::to_string(k) + "))))\n";
  std::istringstream in(python(program));
  PythonRandom r(1234);
  for (const auto& [n, k] : draws) {
    std::string line;
    REQUIRE(std::getline(in, line));
    INFO("sample(range(" << n << "), " << k << ")");
    std::vector<int64_t> want;
    for (const std::string& w : words(line)) want.push_back(std::stoll(w));
    REQUIRE(r.sample(n, k) == want);
  }
  CHECK_THROWS_AS(r.sample(3, 4), Error);
}

// The fixture was written once by Python (its first line says which) and is committed: this case
// needs no Python.
TEST_CASE("sample() equals a committed fixture of Random(1234) draws") {
  std::ifstream in(test::source_path("tests/tasks/fixtures/python_random_1234_sample.txt"));
  REQUIRE(in);
  PythonRandom r(1234);
  int draws = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    int64_t n = 0, k = 0;
    std::string colon;
    f >> n >> k >> colon;
    std::vector<int64_t> want;
    for (int64_t x; f >> x;) want.push_back(x);
    INFO("sample(range(" << n << "), " << k << ")");
    REQUIRE(static_cast<int64_t>(want.size()) == k);
    REQUIRE(r.sample(n, k) == want);
    ++draws;
  }
  CHECK(draws > 100);
}

TEST_CASE(
    "the harness's few-shot sampler: n + 1 drawn and the document removed from its own split") {
  // Documents as the harness holds them (dicts, here strings); the evaluated ones are the same
  // split's, with a duplicate of one of them in the pool.
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) docs.push_back("doc" + std::to_string(i % 37));
  std::string program =
      "import random\nrnd = random.Random(1234)\ndocs = [f'doc{i % 37}' for i in range(40)]\n"
      "for d in [0, 5, 36, 39, 7] * 3:\n"
      "    print(' '.join(str(docs.index(x)) + ':' + x for x in "
      "[x for x in rnd.sample(docs, 4) if x != docs[d]][:3]))\n"
      "for d in range(4):\n"
      "    print(' '.join(str(docs.index(x)) + ':' + x for x in rnd.sample(docs, 5)))\n";
  std::istringstream in(python(program));
  FewshotSampler s(1234);
  const std::vector<int64_t> evaluated = {0, 5, 36, 39, 7, 0, 5, 36, 39, 7, 0, 5, 36, 39, 7};
  for (const int64_t d : evaluated) {
    std::string line;
    REQUIRE(std::getline(in, line));
    const auto picked = s.sample(static_cast<int64_t>(docs.size()), 3, [&](int64_t i) {
      return docs[static_cast<size_t>(i)] == docs[static_cast<size_t>(d)];
    });
    std::vector<std::string> got;
    for (const int64_t i : picked) got.push_back(docs[static_cast<size_t>(i)]);
    std::vector<std::string> want;
    for (const std::string& w : words(line)) want.push_back(w.substr(w.find(':') + 1));
    INFO("evaluated document " << d << ": " << line);
    REQUIRE(got == want);
    for (const std::string& g : got) CHECK(g != docs[static_cast<size_t>(d)]);
  }
  for (int d = 0; d < 4; ++d) {  // examples from another split: n drawn, nothing removed
    std::string line;
    REQUIRE(std::getline(in, line));
    std::vector<std::string> want;
    for (const std::string& w : words(line)) want.push_back(w.substr(w.find(':') + 1));
    std::vector<std::string> got;
    for (const int64_t i : s.sample(static_cast<int64_t>(docs.size()), 5))
      got.push_back(docs[static_cast<size_t>(i)]);
    REQUIRE(got == want);
  }
  CHECK_THROWS_AS(s.sample(3, 3, [](int64_t) { return false; }), Error);  // 4 from 3
  CHECK(s.sample(10, 0).empty());
}

}  // namespace
}  // namespace mtnlg::tasks
