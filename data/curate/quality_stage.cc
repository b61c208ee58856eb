#include "data/curate/quality_stage.h"

#include <fasttext/fasttext.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/shard_writer.h"
#include "data/curate/staged_file.h"
#include "data/json_reader.h"
#include "data/numpy_random.h"
#include "data/python_text.h"

namespace mtnlg::curate {

namespace {

constexpr const char* kHigh = "__label__hq";
constexpr const char* kLow = "__label__lq";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Every record of `shards` through fn(record), in order.
template <typename F>
int64_t for_each_record(const std::vector<std::string>& shards, const QualityCommon& c, F&& fn) {
  std::vector<TextRecord> batch;
  int64_t skipped = 0;
  for (const std::string& shard : shards) {
    TextRecords records(shard, c.text_key, c.bad_records);
    while (records.next_batch(&batch, size_t{16} << 20))
      for (const TextRecord& r : batch) fn(r);
    for (const auto& [why, n] : records.skipped()) {
      skipped += n;
      spdlog::warn("skipped {} record(s) of {}: {} (--bad-records skip)", n, shard, why);
    }
  }
  return skipped;
}

std::string float_text(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Walks a fastText .bin (version 12, not quantized) with bounds checks: fastText's own loader
// loops forever on a file cut inside its dictionary, so a model is checked whole before it is
// handed over. The layout (fastText's save()): magic and version (int32), Args (12 int32 and a
// double), the dictionary (size, nwords, nlabels as int32, ntokens and pruneidx_size as int64,
// each entry a '\0'-terminated word, an int64 count and an int8 type, then pruneidx_size pairs
// of int32, none when it is -1), then twice a bool (quantized) and a dense matrix (int64 rows
// and columns, then the floats).
void check_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  const auto bad = [&](const std::string& why) {
    return corruption("not a fastText model (" + why + " at byte " + std::to_string(at) +
                          "); the fix: train one with mtnlg-curate quality train",
                      path);
  };
  const auto take = [&](auto& v) {
    if (bytes.size() - at < sizeof v) throw bad("the file ends");
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
  };
  int32_t magic = 0, version = 0, i32 = 0, size = 0, nwords = 0, nlabels = 0;
  int64_t ntokens = 0, prune = 0, count = 0, rows = 0, cols = 0;
  double t = 0;
  int8_t type = 0;
  take(magic);
  take(version);
  if (magic != 793712314) throw bad("no fastText magic number");
  if (version != 12) throw bad("version " + std::to_string(version) + ", not 12");
  for (int k = 0; k < 12; ++k) take(i32);
  take(t);
  take(size);
  take(nwords);
  take(nlabels);
  take(ntokens);
  take(prune);
  if (size < 0 || nwords < 0 || nlabels < 0 || prune < -1) throw bad("negative sizes");
  for (int32_t k = 0; k < size; ++k) {
    const size_t end = bytes.find('\0', at);
    if (end == std::string::npos) throw bad("the file ends inside the dictionary");
    at = end + 1;
    take(count);
    take(type);
  }
  for (int64_t k = 0; k < prune; ++k) {
    take(i32);
    take(i32);
  }
  for (int m = 0; m < 2; ++m) {
    bool quantized = false;
    take(quantized);
    if (quantized)
      throw unsupported(
          "a quantized fastText model (.ftz) is not supported; the fix: the .bin "
          "that fasttext quantize started from",
          path);
    take(rows);
    take(cols);
    if (rows < 0 || cols < 0 ||
        static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) >
            (bytes.size() - at) / sizeof(float))
      throw bad("a matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                " floats does not fit the file");
    at += static_cast<size_t>(rows * cols) * sizeof(float);
  }
  if (at != bytes.size()) throw bad(std::to_string(bytes.size() - at) + " bytes after the model");
}

// fastText's model from `path` into ft, errors naming it.
void load_model(fasttext::FastText& ft, const std::string& path) {
  if (!std::filesystem::exists(path))
    throw not_found("no such model; the fix: train one with mtnlg-curate quality train", path);
  check_model_file(path);
  try {
    ft.loadModel(path);
  } catch (const std::exception& e) {
    throw corruption(std::string("not a fastText model (") + e.what() +
                         "); the fix: train one with mtnlg-curate quality train",
                     path);
  }
}

// The probability of __label__hq for a document's text.
float high_quality_probability(const fasttext::FastText& ft, const std::string& text) {
  std::istringstream in(quality_line(text) + "\n");
  std::vector<std::pair<fasttext::real, std::string>> predictions;
  ft.predictLine(in, predictions, -1, 0.0);
  for (const auto& [p, label] : predictions)
    if (label == kHigh) return p;
  return 0.0f;
}

}  // namespace

std::string quality_line(const std::string& text) {
  std::u32string t = utf8_to_u32(text);
  for (char32_t& c : t)
    if (c == U'\n') c = U' ';
  if (t.size() > 4000) t.resize(4000);
  if (t.size() > 1500) t.erase(0, t.size() - 1500);
  return u32_to_utf8(t);
}

QualityTrainStats run_quality_train(const QualityTrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  QualityTrainStats stats;
  if (o.positive.empty() || o.negative.empty())
    throw invalid_argument("quality train needs --positive and --negative shards", "--positive");
  std::vector<std::string> lines;
  for_each_record(o.positive, o.common, [&](const TextRecord& r) {
    lines.push_back(std::string(kHigh) + " " + quality_line(r.text));
    ++stats.positive;
  });
  for_each_record(o.negative, o.common, [&](const TextRecord& r) {
    lines.push_back(std::string(kLow) + " " + quality_line(r.text));
    ++stats.negative;
  });
  if (stats.positive == 0 || stats.negative == 0)
    throw invalid_argument("quality train: no positive or no negative documents read",
                           "--positive");
  NumpyRandomState(o.seed).shuffle(lines.data(), static_cast<int64_t>(lines.size()));
  const std::string data = o.output + ".train.tmp";
  {
    StagedFile f(data);
    for (const std::string& l : lines) {
      f.write(l.data(), l.size());
      f.write("\n", 1);
    }
    f.commit();
  }
  lines = {};
  fasttext::Args args;
  args.input = data;
  args.model = fasttext::model_name::sup;
  args.loss = fasttext::loss_name::softmax;
  args.minn = 0;
  args.maxn = 0;
  args.lr = o.lr;
  args.dim = o.dim;
  args.epoch = o.epoch;
  args.wordNgrams = o.word_ngrams;
  args.minCount = o.min_count;
  args.bucket = o.bucket;
  args.seed = static_cast<int>(o.seed);
  args.thread = 1;  // fastText's threads race on the weights: one thread trains reproducibly
  args.verbose = 0;
  fasttext::FastText ft;
  try {
    ft.train(args);
  } catch (const std::exception& e) {
    std::filesystem::remove(data);
    throw invalid_argument(std::string("fastText training failed: ") + e.what(), "--positive");
  }
  std::filesystem::remove(data);
  const std::string tmp = o.output + ".tmp";
  ft.saveModel(tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, o.output, ec);
  if (ec) throw io_error("cannot rename " + tmp + ": " + ec.message(), o.output);
  stats.seconds = seconds_since(start);
  return stats;
}

QualityStats run_quality_score(const QualityScoreOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  fasttext::FastText ft;
  load_model(ft, o.model);
  QualityStats stats;
  TextRecords records(o.input, o.common.text_key, o.common.bad_records);
  ShardWriter out(o.output);
  PreprocessProgress progress(o.common.progress, records.file_size(), 100000);
  const int threads = o.common.threads > 0 ? o.common.threads : omp_get_num_procs();
  std::vector<TextRecord> batch;
  std::vector<float> scores;
  double sum = 0;
  while (records.next_batch(&batch, size_t{16} << 20)) {
    const auto n = static_cast<int64_t>(batch.size());
    scores.resize(batch.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i)
      scores[static_cast<size_t>(i)] =
          high_quality_probability(ft, batch[static_cast<size_t>(i)].text);
    for (int64_t i = 0; i < n; ++i) {
      const float s = scores[static_cast<size_t>(i)];
      out.write_line(
          rewrite_record(batch[static_cast<size_t>(i)].raw, {{o.score_key, float_text(s)}}));
      sum += s;
    }
    stats.documents += n;
    progress.update(records.bytes_read(), stats.documents, -1);
  }
  progress.finish();
  out.commit();
  for (const auto& [why, n] : records.skipped()) stats.skipped += n;
  stats.kept = stats.documents;
  stats.mean_score = stats.documents > 0 ? sum / static_cast<double>(stats.documents) : 0.0;
  stats.seconds = seconds_since(start);
  return stats;
}

QualityStats run_quality_filter(const QualityFilterOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  QualityStats stats;
  TextRecords records(o.input, o.common.text_key, o.common.bad_records);
  ShardWriter out(o.output);
  NumpyRandomState rng(o.seed);
  std::vector<TextRecord> batch;
  double sum = 0;
  while (records.next_batch(&batch, size_t{16} << 20)) {
    for (const TextRecord& r : batch) {
      double score = 0;
      bool found = false;
      for (const JsonMember& m : parse_json_object_members(r.raw))
        if (m.key == o.score_key) {
          const auto res = std::from_chars(m.raw.data(), m.raw.data() + m.raw.size(), score);
          found = res.ec == std::errc() && res.ptr == m.raw.data() + m.raw.size();
        }
      if (!found) {
        if (o.common.bad_records == BadRecords::kError)
          throw invalid_argument("line " + std::to_string(r.line) + ": no number in '" +
                                     o.score_key +
                                     "'; the fix: score the shard first (mtnlg-curate "
                                     "quality score), or pass --bad-records skip",
                                 o.input + ":" + std::to_string(r.line));
        ++stats.skipped;
        continue;
      }
      ++stats.documents;
      sum += score;
      // GPT-3: keep when np.random.pareto(alpha) > 1 - score (one draw per document, in order).
      const bool keep =
          o.use_threshold ? score >= o.threshold : rng.pareto(o.pareto_alpha) > 1.0 - score;
      if (keep) {
        out.write_line(r.raw);
        ++stats.kept;
      }
    }
  }
  out.commit();
  for (const auto& [why, n] : records.skipped()) stats.skipped += n;
  stats.mean_score = stats.documents > 0 ? sum / static_cast<double>(stats.documents) : 0.0;
  stats.seconds = seconds_since(start);
  if (!o.report.empty()) {
    const std::string line = JsonLine()
                                 .add("input", o.input)
                                 .add("rule", o.use_threshold ? "threshold" : "pareto")
                                 .add(o.use_threshold ? "threshold" : "pareto_alpha",
                                      o.use_threshold ? o.threshold : o.pareto_alpha)
                                 .add("seed", static_cast<int64_t>(o.seed))
                                 .add("documents", stats.documents)
                                 .add("kept", stats.kept)
                                 .add("removed", stats.documents - stats.kept)
                                 .add("mean_score", stats.mean_score)
                                 .add("bad_records_skipped", stats.skipped)
                                 .str() +
                             "\n";
    write_whole_file(o.report, line);
  }
  return stats;
}

}  // namespace mtnlg::curate
