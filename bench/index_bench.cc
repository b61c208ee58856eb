// mtnlg-bench-index: time opening a 100M-document indexed dataset and building (then
// reloading from cache) GPTDataset's indices for a train split, printing wall time and peak
// RSS. The corpus is synthetic: a real .idx of log-normal document lengths (median --median
// tokens, sigma 1, so a mean about 1.65x the median) and a sparse .bin of the right size
// (ftruncate: no token is ever read).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "core/rng.h"
#include "data/indexed_format.h"
#include "data/shuffled_gpt_dataset.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

template <typename T>
void put(std::FILE* f, const T& v) {
  std::fwrite(&v, sizeof v, 1, f);
}

// Writes PREFIX.idx (uint16 tokens, one sequence per document) and a sparse PREFIX.bin.
int64_t write_corpus(const std::string& prefix, int64_t docs, double median) {
  std::vector<int32_t> lengths(static_cast<size_t>(docs));
  int64_t tokens = 0;
  const mtnlg::RngStream rng{42, 0, 0};
  for (int64_t i = 0; i < docs; ++i) {
    const double x = median * std::exp(mtnlg::rng_normal(rng, static_cast<uint64_t>(i)));
    const int32_t len = static_cast<int32_t>(std::clamp(x, 1.0, 200000.0));
    lengths[static_cast<size_t>(i)] = len;
    tokens += len;
  }
  std::FILE* f = std::fopen((prefix + ".idx").c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot create " + prefix + ".idx");
  std::fwrite(mtnlg::idx_format::kMagic.data(), 1, mtnlg::idx_format::kMagic.size(), f);
  put<uint64_t>(f, mtnlg::idx_format::kVersion);
  put<uint8_t>(f, static_cast<uint8_t>(mtnlg::TokenType::kUInt16));
  put<uint64_t>(f, static_cast<uint64_t>(docs));
  put<uint64_t>(f, static_cast<uint64_t>(docs + 1));
  std::fwrite(lengths.data(), 4, lengths.size(), f);
  std::vector<int64_t> buf;
  buf.reserve(1 << 20);
  int64_t pointer = 0;
  for (int64_t i = 0; i < docs; ++i) {
    buf.push_back(pointer);
    pointer += 2 * static_cast<int64_t>(lengths[static_cast<size_t>(i)]);
    if (buf.size() == buf.capacity()) {
      std::fwrite(buf.data(), 8, buf.size(), f);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 8, buf.size(), f);
  buf.clear();
  for (int64_t i = 0; i <= docs; ++i) {
    buf.push_back(i);
    if (buf.size() == buf.capacity()) {
      std::fwrite(buf.data(), 8, buf.size(), f);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 8, buf.size(), f);
  std::fclose(f);
  f = std::fopen((prefix + ".bin").c_str(), "wb");
  if (f == nullptr || ::ftruncate(::fileno(f), 2 * tokens) != 0) {
    throw std::runtime_error("cannot create " + prefix + ".bin");
  }
  std::fclose(f);
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times IndexedDataset::open and GPTDataset index building at corpus scale"};
  int64_t docs = 100'000'000, samples = 100'000'000, seq = 2048;
  double median = 500.0;
  std::string dir = "/tmp/mtnlg-index-bench";
  bool keep = false;
  app.add_option("--docs", docs, "documents in the synthetic corpus");
  app.add_option("--median", median, "median document length in tokens (log-normal, sigma 1)");
  app.add_option("--samples", samples, "train samples requested");
  app.add_option("--seq", seq, "sequence length S");
  app.add_option("--dir", dir, "scratch directory (corpus and cache)");
  app.add_flag("--keep", keep, "keep the scratch directory");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string prefix = dir + "/corpus";
  double t = now_s();
  const int64_t tokens = write_corpus(prefix, docs, median);
  std::printf("corpus: %lld documents, %.3g tokens (mean %.0f), .idx %.2f GB; written in %.1f s\n",
              static_cast<long long>(docs), static_cast<double>(tokens),
              static_cast<double>(tokens) / static_cast<double>(docs),
              static_cast<double>(fs::file_size(prefix + ".idx")) / 1e9, now_s() - t);

  t = now_s();
  auto ds = mtnlg::IndexedDataset::open(prefix);
  std::printf("IndexedDataset::open: %.2f s, peak RSS %.2f GiB\n", now_s() - t, peak_rss_gib());

  mtnlg::GPTDatasetConfig cfg;
  cfg.seq_length = seq;
  cfg.num_samples = samples;
  cfg.cache_dir = dir + "/cache";
  const mtnlg::DocumentRange all{0, ds->num_sequences()};
  for (int pass = 0; pass < 2; ++pass) {
    t = now_s();
    mtnlg::GPTDataset gpt(ds, all, cfg);
    const double build = now_s() - t;
    std::vector<int32_t> out(static_cast<size_t>(seq + 1));
    t = now_s();
    for (int64_t i = 0; i < 1000; ++i) gpt.sample(i * (gpt.size() / 1000), out.data());
    std::printf(
        "GPTDataset (%s): %.1f s for %lld samples of S=%lld (%lld epochs%s, document index "
        "%lld x %d B); 1000 random samples in %.3f s; peak RSS %.2f GiB\n",
        gpt.built_from_cache() ? "loaded from cache" : "built + cached", build,
        static_cast<long long>(gpt.size()), static_cast<long long>(seq),
        static_cast<long long>(gpt.num_epochs()),
        gpt.separate_final_epoch() ? ", separate final epoch" : "",
        static_cast<long long>(gpt.document_index().size()), gpt.document_index().width(),
        now_s() - t, peak_rss_gib());
  }
  if (!keep) fs::remove_all(dir);
  return 0;
}
