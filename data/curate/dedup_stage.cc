#include "data/curate/dedup_stage.h"

#include <omp.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/lsh_params.h"
#include "data/curate/shard_writer.h"
#include "data/curate/spill_file.h"
#include "data/curate/staged_file.h"

namespace mtnlg::curate {

namespace {

// A document: its input file, its line there, and its place in keep order.
struct Doc {
  int32_t input = 0;
  int32_t priority = 0;  // its dataset's position in --priority
  int64_t line = 0;
};

// Keep order: the dataset first in --priority, then the input's position, then the line.
bool keeps_before(const Doc& a, const Doc& b) {
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.input != b.input) return a.input < b.input;
  return a.line < b.line;
}

class UnionFind {
 public:
  explicit UnionFind(int64_t n) : parent_(static_cast<size_t>(n)) {
    std::iota(parent_.begin(), parent_.end(), int64_t{0});
  }
  int64_t find(int64_t x) {
    while (parent_[static_cast<size_t>(x)] != x) {
      parent_[static_cast<size_t>(x)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(x)])];
      x = parent_[static_cast<size_t>(x)];
    }
    return x;
  }
  // Joins the two sets under the smaller root (deterministic); false if already one.
  bool unite(int64_t a, int64_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    if (b < a) std::swap(a, b);
    parent_[static_cast<size_t>(b)] = a;
    return true;
  }

 private:
  std::vector<int64_t> parent_;
};

struct Pair {
  int64_t a, b;
  double jaccard;
};

// A document's fate in its shard's keep file (work_dir/keep-F.bin: one byte a record).
constexpr char kKept = 1, kExactRemoved = 2, kFuzzyRemoved = 3;

// One document's entry in its shard's signature file.
struct SignatureRow {
  int64_t line = 0;
  XXH128_hash_t exact{};
  std::vector<uint64_t> keys;  // [bands]
};

// work_dir/signatures-F.bin: "MTNLGSIG", version 1 (u32), bands (u32), the settings' hash (u64),
// documents (u64), records skipped (u64), then per document its line (i64), the normalized
// text's XXH3-128 (high, low) and its band keys (u64 each), little-endian.
constexpr size_t kSigHeader = 8 + 4 + 4 + 8 + 8 + 8;

class SignatureWriter {
 public:
  SignatureWriter(const std::string& path, uint64_t settings, int bands)
      : file_(path), settings_(settings), bands_(bands) {
    header(0, 0);
  }
  void add(const SignatureRow& r) {
    file_.write(&r.line, 8);
    file_.write(&r.exact.high64, 8);
    file_.write(&r.exact.low64, 8);
    file_.write(r.keys.data(), r.keys.size() * 8);
    ++docs_;
  }
  void commit(uint64_t skipped) {
    header(docs_, skipped);
    file_.commit();
  }

 private:
  void header(uint64_t docs, uint64_t skipped) {
    char h[kSigHeader];
    std::memcpy(h, "MTNLGSIG", 8);
    const uint32_t version = 1, bands = static_cast<uint32_t>(bands_);
    std::memcpy(h + 8, &version, 4);
    std::memcpy(h + 12, &bands, 4);
    std::memcpy(h + 16, &settings_, 8);
    std::memcpy(h + 24, &docs, 8);
    std::memcpy(h + 32, &skipped, 8);
    if (!started_) {
      file_.write(h, kSigHeader);
      started_ = true;
    } else {
      file_.write_at(0, h, kSigHeader);
    }
  }
  bool started_ = false;
  StagedFile file_;
  uint64_t settings_;
  int bands_;
  uint64_t docs_ = 0;
};

struct SignatureFile {
  // Whether `path` holds a whole signature file made under these settings.
  static bool valid(const std::string& path, uint64_t settings, int bands,
                    std::string* why = nullptr) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      if (why) *why = "missing";
      return false;
    }
    char h[kSigHeader];
    in.read(h, kSigHeader);
    uint32_t version = 0, b = 0;
    uint64_t s = 0, docs = 0;
    std::memcpy(&version, h + 8, 4);
    std::memcpy(&b, h + 12, 4);
    std::memcpy(&s, h + 16, 8);
    std::memcpy(&docs, h + 24, 8);
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const bool ok = in.gcount() == static_cast<std::streamsize>(kSigHeader) &&
                    std::memcmp(h, "MTNLGSIG", 8) == 0 && version == 1 &&
                    b == static_cast<uint32_t>(bands) && !ec &&
                    size == kSigHeader + docs * (24 + 8 * static_cast<uint64_t>(bands));
    if (why)
      *why = !ok             ? "not a whole signature file"
             : s != settings ? "made under other settings or from another version of its shard"
                             : "";
    return ok && s == settings;
  }

  // The whole file's header: (documents, records skipped); throws corruption naming the shard
  // and the fix when the file is not whole or was made under other settings.
  static std::pair<uint64_t, uint64_t> header(const std::string& path, uint64_t settings, int bands,
                                              const std::string& shard) {
    std::string why;
    if (!valid(path, settings, bands, &why))
      throw corruption("the signatures of " + shard + " are " + why +
                           "; the fix: run mtnlg-curate dedup --step signatures for its task (or "
                           "--step all)",
                       path);
    std::ifstream in(path, std::ios::binary);
    char h[kSigHeader];
    in.read(h, kSigHeader);
    uint64_t docs = 0, skipped = 0;
    std::memcpy(&docs, h + 24, 8);
    std::memcpy(&skipped, h + 32, 8);
    return {docs, skipped};
  }

  // Calls visit(line, exact, keys) for each row of a file header() accepted, in order, reading
  // a megabyte of rows at a time: the components step never holds a shard's rows.
  template <typename Visit>
  static void for_each_row(const std::string& path, int bands, Visit visit) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(kSigHeader));
    const size_t row = 24 + 8 * static_cast<size_t>(bands);
    std::vector<char> buf(std::max<size_t>(1, (1u << 20) / row) * row);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      const auto got = static_cast<size_t>(in.gcount());
      if (got % row != 0) throw corruption("a signature file ends inside a row", path);
      for (size_t at = 0; at < got; at += row) {
        int64_t line = 0;
        XXH128_hash_t exact{};
        std::memcpy(&line, buf.data() + at, 8);
        std::memcpy(&exact.high64, buf.data() + at + 8, 8);
        std::memcpy(&exact.low64, buf.data() + at + 16, 8);
        visit(line, exact, reinterpret_cast<const unsigned char*>(buf.data() + at + 24));
      }
    }
  }
};

// Shard f's kept records, from its keep file, into OUTPUT_DIR/NAME/<file name>.
void write_kept(const DedupOptions& o, size_t f, const std::string& keep_file, size_t batch_bytes) {
  const DedupInput& in = o.inputs[f];
  std::ifstream k(keep_file, std::ios::binary);
  if (!k)
    throw not_found("no keep file for " + in.file +
                        "; the fix: run mtnlg-curate dedup --step "
                        "components first",
                    keep_file);
  const std::string status((std::istreambuf_iterator<char>(k)), std::istreambuf_iterator<char>());
  const std::string dir = o.output_dir + "/" + in.dataset;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw io_error("cannot create the directory: " + ec.message(), dir);
  ShardWriter out(dir + "/" + std::filesystem::path(in.file).filename().string());
  TextRecords records(in.file, o.text_key, o.bad_records);
  std::vector<TextRecord> batch;
  size_t d = 0;
  while (records.next_batch(&batch, batch_bytes))
    for (const TextRecord& r : batch) {
      if (d >= status.size()) break;
      if (status[d++] == kKept) out.write_line(r.raw);
    }
  if (d != status.size() || records.next_batch(&batch, batch_bytes))
    throw corruption(in.file + " changed since its signatures were made (" +
                         std::to_string(status.size()) + " records then); the fix: run dedup again",
                     keep_file);
  out.commit();
}

// Band keys of a signature: XXH3-64 of each band's r values.
void band_keys(const uint32_t* sig, int bands, int rows, uint64_t* keys) {
  for (int j = 0; j < bands; ++j)
    keys[j] = XXH3_64bits(sig + j * rows, static_cast<size_t>(rows) * sizeof(uint32_t));
}

std::string doc_json(const Doc& d, const DedupOptions& o, bool exact) {
  JsonLine j;
  j.add("dataset", o.inputs[static_cast<size_t>(d.input)].dataset)
      .add("file", o.inputs[static_cast<size_t>(d.input)].file)
      .add("line", d.line);
  if (exact) j.add("exact", true);
  return j.str();
}

}  // namespace

double dedup_components_memory_mb(int64_t documents, int64_t batch_mb) {
  return static_cast<double>(documents) * kComponentBytesPerDocument / (1 << 20) +
         3.0 * static_cast<double>(batch_mb) + 16.0;
}

DedupInput parse_dedup_input(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw invalid_argument("--input " + spec +
                               ": expected NAME=FILE (a dataset name and one of its shards), "
                               "e.g. --input cc=cc-00.jsonl.zst",
                           "--input");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

DedupStats run_dedup(const DedupOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  DedupStats stats;
  // ---- the command line's promises ----
  if (o.inputs.empty())
    throw invalid_argument("dedup needs at least one --input NAME=FILE", "--input");
  std::map<std::string, int32_t> priority_of;
  for (size_t i = 0; i < o.priority.size(); ++i)
    if (!priority_of.emplace(o.priority[i], static_cast<int32_t>(i)).second)
      throw invalid_argument("--priority names " + o.priority[i] + " twice", "--priority");
  std::set<std::string> outputs;
  for (const DedupInput& in : o.inputs) {
    if (!priority_of.count(in.dataset))
      throw invalid_argument("--priority does not name dataset '" + in.dataset + "' (of --input " +
                                 in.dataset + "=" + in.file +
                                 "); the fix: list every dataset, the one to keep first first",
                             "--priority");
    const std::string out = in.dataset + "/" + std::filesystem::path(in.file).filename().string();
    if (!outputs.insert(out).second)
      throw invalid_argument("two inputs of dataset " + in.dataset + " are both named " +
                                 std::filesystem::path(in.file).filename().string() +
                                 ": their outputs would collide in " + o.output_dir + "/" +
                                 in.dataset + "; the fix: give the shards distinct names",
                             "--input");
  }
  LshParams lsh{o.bands, o.rows};
  if (lsh.bands == 0 && lsh.rows == 0) {
    lsh = optimal_lsh_params(o.threshold, o.num_perm);
  } else if (lsh.bands < 1 || lsh.rows < 1 || lsh.bands * lsh.rows > o.num_perm) {
    throw invalid_argument("--bands " + std::to_string(lsh.bands) + " x --rows " +
                               std::to_string(lsh.rows) + " must be positive and at most " +
                               "--num-perm " + std::to_string(o.num_perm),
                           "--bands");
  }
  stats.bands = lsh.bands;
  stats.rows = lsh.rows;
  // The output directories now, before the work: a mistake there fails in a second.
  for (const std::string& dir :
       {o.output_dir, std::filesystem::path(o.report).parent_path().string()}) {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) throw io_error("cannot create the directory: " + ec.message(), dir);
  }
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  const MinHasher hasher(o.family, o.num_perm, o.seed);
  const auto batch_bytes = static_cast<size_t>(o.batch_mb) << 20;
  int64_t total_bytes = 0;
  for (const DedupInput& in : o.inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(in.file, ec);
    if (!ec) total_bytes += static_cast<int64_t>(size);
  }
  spdlog::info(
      "dedup: {} input file(s), threshold {}, {} {} functions (seed {}), {} bands of {} "
      "rows",
      o.inputs.size(), o.threshold, o.num_perm, hash_family_name(o.family), o.seed, lsh.bands,
      lsh.rows);

  // ---- 1. signatures as band keys, with the normalized text's hash: a file per shard ----
  const std::string work = o.work_dir.empty() ? o.output_dir + "/.work" : o.work_dir;
  {
    std::error_code ec;
    std::filesystem::create_directories(work, ec);
    if (ec) throw io_error("cannot create the directory: " + ec.message(), work);
  }
  const auto mine = [&](size_t f) {
    return o.step == DedupStep::kAll ||
           static_cast<int>(f % static_cast<size_t>(o.task_count)) == o.task_index;
  };
  const auto sig_path = [&](size_t f) {
    return work + "/signatures-" + std::to_string(f) + ".bin";
  };
  const auto keep_path = [&](size_t f) { return work + "/keep-" + std::to_string(f) + ".bin"; };
  // What a shard's signatures depend on: a file made under other settings is made again.
  const auto settings_of = [&](size_t f) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(o.inputs[f].file, ec);
    const auto time =
        std::filesystem::last_write_time(o.inputs[f].file, ec).time_since_epoch().count();
    const std::string s = o.inputs[f].file + "|" + std::to_string(size) + "|" +
                          std::to_string(time) + "|" + hash_family_name(o.family) + "|" +
                          std::to_string(o.num_perm) + "|" + std::to_string(o.seed) + "|" +
                          std::to_string(lsh.bands) + "x" + std::to_string(lsh.rows) + "|" +
                          o.text_key + "|" + std::to_string(static_cast<int>(o.bad_records));
    return XXH3_64bits(s.data(), s.size());
  };
  if (o.step == DedupStep::kAll || o.step == DedupStep::kSignatures) {
    PreprocessProgress progress(o.progress, total_bytes, 100000);
    int64_t done_bytes = 0, signed_docs = 0;
    std::vector<TextRecord> batch;
    for (size_t f = 0; f < o.inputs.size(); ++f) {
      if (!mine(f)) continue;
      const uint64_t settings = settings_of(f);
      if (SignatureFile::valid(sig_path(f), settings, lsh.bands)) continue;  // a rerun's
      const DedupInput& in = o.inputs[f];
      TextRecords records(in.file, o.text_key, o.bad_records);
      SignatureWriter out(sig_path(f), settings, lsh.bands);
      std::vector<SignatureRow> rows;
      while (records.next_batch(&batch, batch_bytes)) {
        const auto n = static_cast<int64_t>(batch.size());
        rows.assign(batch.size(),
                    SignatureRow{0, {}, std::vector<uint64_t>(static_cast<size_t>(lsh.bands))});
#pragma omp parallel num_threads(threads)
        {
          NormalizedText norm;
          std::vector<uint32_t> sig(static_cast<size_t>(o.num_perm));
#pragma omp for schedule(dynamic, 16)
          for (int64_t i = 0; i < n; ++i) {
            SignatureRow& r = rows[static_cast<size_t>(i)];
            normalize_for_shingles(batch[static_cast<size_t>(i)].text, &norm);
            hasher.signature(norm, sig.data());
            band_keys(sig.data(), lsh.bands, lsh.rows, r.keys.data());
            r.exact = XXH3_128bits(norm.text.data(), norm.text.size());
            r.line = batch[static_cast<size_t>(i)].line;
          }
        }
        for (const SignatureRow& r : rows) out.add(r);
        signed_docs += n;
        progress.update(done_bytes + records.bytes_read(), signed_docs, -1);
      }
      done_bytes += records.file_size();
      int64_t skipped = 0;
      for (const auto& [why, n] : records.skipped()) {
        skipped += n;
        spdlog::warn("skipped {} record(s) of {}: {} (--bad-records skip)", n, in.file, why);
      }
      out.commit(skipped);
    }
    progress.finish();
    if (o.step == DedupStep::kSignatures) return stats;
  }

  if (o.step == DedupStep::kOutput) {
    // --step output: the kept records of this task's shards.
    for (size_t f = 0; f < o.inputs.size(); ++f)
      if (mine(f)) write_kept(o, f, keep_path(f), batch_bytes);
    return stats;
  }

  // ---- the components step: sized before anything is allocated ----
  std::vector<int64_t> first_doc(o.inputs.size() + 1, 0);  // each shard's first document
  for (size_t f = 0; f < o.inputs.size(); ++f) {
    const auto [shard_docs, skipped] =
        SignatureFile::header(sig_path(f), settings_of(f), lsh.bands, o.inputs[f].file);
    stats.datasets[o.inputs[f].dataset].skipped += static_cast<int64_t>(skipped);
    first_doc[f + 1] = first_doc[f] + static_cast<int64_t>(shard_docs);
  }
  const int64_t n_docs = first_doc[o.inputs.size()];
  stats.documents = n_docs;
  {
    const double need_mb = dedup_components_memory_mb(n_docs, o.batch_mb);
    spdlog::info("dedup: components of {} documents, about {:.0f} MB{}", n_docs, need_mb,
                 o.memory_mb > 0 ? fmt::format(" (--memory-mb {})", o.memory_mb) : "");
    if (o.memory_mb > 0 && need_mb > static_cast<double>(o.memory_mb))
      throw invalid_argument(
          fmt::format("the components step needs about {:.0f} MB for {} documents ({} bytes a "
                      "document, and --batch-mb {} three times over), more than --memory-mb {}; "
                      "the fix: a larger --memory-mb on a machine that has it, or a smaller "
                      "--batch-mb",
                      need_mb, n_docs, kComponentBytesPerDocument, o.batch_mb, o.memory_mb),
          "--memory-mb");
  }
  std::vector<Doc> docs;
  std::vector<XXH128_hash_t> exact;  // [documents]
  docs.reserve(static_cast<size_t>(n_docs));
  exact.reserve(static_cast<size_t>(n_docs));
  for (size_t f = 0; f < o.inputs.size(); ++f) {
    const int32_t pri = priority_of.at(o.inputs[f].dataset);
    SignatureFile::for_each_row(sig_path(f), lsh.bands,
                                [&](int64_t line, XXH128_hash_t x, const unsigned char*) {
                                  docs.push_back(Doc{static_cast<int32_t>(f), pri, line});
                                  exact.push_back(x);
                                });
    if (static_cast<int64_t>(docs.size()) != first_doc[f + 1])
      throw corruption("the signatures of " + o.inputs[f].file +
                           " changed while read; the fix: "
                           "run dedup again",
                       sig_path(f));
  }

  // Exact duplicates: each class's first document in keep order represents it.
  UnionFind groups(n_docs);
  std::vector<char> exact_dup(static_cast<size_t>(n_docs), 0);
  std::vector<char> representative(static_cast<size_t>(n_docs), 1);
  {
    std::vector<int64_t> order(static_cast<size_t>(n_docs));
    std::iota(order.begin(), order.end(), int64_t{0});
    const auto hash_less = [&](int64_t a, int64_t b) {
      const XXH128_hash_t &x = exact[static_cast<size_t>(a)], &y = exact[static_cast<size_t>(b)];
      if (x.high64 != y.high64) return x.high64 < y.high64;
      if (x.low64 != y.low64) return x.low64 < y.low64;
      return keeps_before(docs[static_cast<size_t>(a)], docs[static_cast<size_t>(b)]);
    };
    std::sort(order.begin(), order.end(), hash_less);
    for (size_t i = 1; i < order.size(); ++i) {
      const XXH128_hash_t &x = exact[static_cast<size_t>(order[i - 1])],
                          &y = exact[static_cast<size_t>(order[i])];
      if (XXH128_isEqual(x, y)) {
        groups.unite(order[i - 1], order[i]);
        representative[static_cast<size_t>(order[i])] = 0;
        exact_dup[static_cast<size_t>(order[i])] = 1;
      }
    }
  }
  exact = {};

  // ---- 2. LSH buckets: band by band (each read from the signature files), the representatives
  // sorted by key. A bucket's documents in index order; pairs (i, j), i < j, in that order. ----
  std::vector<int64_t> bucket_start{0}, bucket_docs;  // bucket k: bucket_docs[start[k], start[k+1])
  constexpr uint64_t kNotCandidate = ~uint64_t{0};
  std::vector<uint64_t> text_at(static_cast<size_t>(n_docs), kNotCandidate);  // in the spill file
  {
    std::vector<std::pair<uint64_t, int64_t>> band;
    band.reserve(static_cast<size_t>(n_docs));
    for (int j = 0; j < lsh.bands; ++j) {
      band.clear();
      for (size_t f = 0; f < o.inputs.size(); ++f) {
        int64_t d = first_doc[f];
        SignatureFile::for_each_row(sig_path(f), lsh.bands,
                                    [&](int64_t, XXH128_hash_t, const unsigned char* keys) {
                                      if (representative[static_cast<size_t>(d)]) {
                                        uint64_t key = 0;
                                        std::memcpy(&key, keys + 8 * j, 8);
                                        band.emplace_back(key, d);
                                      }
                                      ++d;
                                    });
      }
      std::sort(band.begin(), band.end());
      for (size_t i = 0; i < band.size();) {
        size_t k = i + 1;
        while (k < band.size() && band[k].first == band[i].first) ++k;
        if (k - i >= 2) {
          for (size_t m = i; m < k; ++m) {
            bucket_docs.push_back(band[m].second);
            text_at[static_cast<size_t>(band[m].second)] = 0;  // a candidate
          }
          bucket_start.push_back(static_cast<int64_t>(bucket_docs.size()));
          stats.candidate_pairs += static_cast<int64_t>((k - i) * (k - i - 1) / 2);
        }
        i = k;
      }
    }
  }

  // ---- 3. the candidates' normalized texts into a scratch file (the kernel's page cache holds
  // them, not this process), then every pair verified in a fixed order ----
  SpillFile spill(work);
  {
    std::vector<TextRecord> batch;
    NormalizedText norm;
    int64_t d = 0;
    for (const DedupInput& in : o.inputs) {
      TextRecords records(in.file, o.text_key, BadRecords::kSkip);
      while (records.next_batch(&batch, batch_bytes))
        for (const TextRecord& r : batch) {
          if (d < n_docs && text_at[static_cast<size_t>(d)] != kNotCandidate) {
            normalize_for_shingles(r.text, &norm);
            text_at[static_cast<size_t>(d)] = spill.append(norm.text);
          }
          ++d;
        }
    }
    MTNLG_CHECK_MSG(d == n_docs,
                    "dedup: the inputs changed while read: " << d << " records, then " << n_docs);
    spill.flush();
  }
  std::vector<Pair> edges_found;
  {
    // Pairs in order, in batches of fixed size: the batch's pairs whose documents were not yet
    // connected when it was formed are verified in parallel, then joined in order.
    constexpr size_t kBatch = 4096;
    std::unordered_set<uint64_t> rejected;  // pairs verified below the threshold (a * n + b)
    std::vector<Pair> todo;
    const auto flush = [&] {
#pragma omp parallel num_threads(threads)
      {
        int64_t cached = -1;
        NormalizedText a_text, b_text;
        std::string bytes;
        std::vector<std::string_view> a_set;
#pragma omp for schedule(dynamic, 8)
        for (size_t i = 0; i < todo.size(); ++i) {
          Pair& p = todo[i];
          if (p.a != cached) {
            spill.read(text_at[static_cast<size_t>(p.a)], &bytes);
            set_normalized_text(std::move(bytes), &a_text);
            a_set = distinct_shingles(a_text);
            cached = p.a;
          }
          spill.read(text_at[static_cast<size_t>(p.b)], &bytes);
          set_normalized_text(std::move(bytes), &b_text);
          p.jaccard = jaccard(a_set, distinct_shingles(b_text));
        }
      }
      for (const Pair& p : todo) {
        ++stats.verified_pairs;
        if (p.jaccard >= o.threshold) {
          groups.unite(p.a, p.b);
          edges_found.push_back(p);
        } else {
          rejected.insert(static_cast<uint64_t>(p.a) * static_cast<uint64_t>(n_docs) +
                          static_cast<uint64_t>(p.b));
        }
      }
      todo.clear();
    };
    for (size_t k = 0; k + 1 < bucket_start.size(); ++k) {
      const int64_t* bucket = bucket_docs.data() + bucket_start[k];
      const auto size = static_cast<size_t>(bucket_start[k + 1] - bucket_start[k]);
      for (size_t i = 0; i < size; ++i)
        for (size_t j = i + 1; j < size; ++j) {
          const int64_t a = bucket[i], b = bucket[j];
          if (groups.find(a) == groups.find(b)) continue;
          if (rejected.count(static_cast<uint64_t>(a) * static_cast<uint64_t>(n_docs) +
                             static_cast<uint64_t>(b)))
            continue;
          todo.push_back({a, b, 0.0});
          if (todo.size() == kBatch) flush();
        }
    }
    flush();
  }
  stats.edges = static_cast<int64_t>(edges_found.size());
  bucket_start = {};
  bucket_docs = {};
  text_at = {};
  representative = {};

  // ---- 4. components, the document each keeps ----
  // A group's root is its smallest document (unite joins under the smaller root), so groups in
  // root order with their members in index order are the documents of groups sorted by root.
  std::vector<int64_t> root(static_cast<size_t>(n_docs));
  std::vector<int32_t> group_size(static_cast<size_t>(n_docs), 0);
  for (int64_t d = 0; d < n_docs; ++d) {
    root[static_cast<size_t>(d)] = groups.find(d);
    ++group_size[static_cast<size_t>(root[static_cast<size_t>(d)])];
  }
  std::vector<int64_t> grouped;  // documents of groups of two or more, by (root, index)
  for (int64_t d = 0; d < n_docs; ++d)
    if (group_size[static_cast<size_t>(root[static_cast<size_t>(d)])] >= 2) grouped.push_back(d);
  std::stable_sort(grouped.begin(), grouped.end(), [&](int64_t a, int64_t b) {
    return root[static_cast<size_t>(a)] < root[static_cast<size_t>(b)];
  });
  group_size = {};
  std::vector<char> keep(static_cast<size_t>(n_docs), 1);
  std::map<int64_t, std::vector<const Pair*>> pairs_of;
  for (const Pair& p : edges_found) pairs_of[root[static_cast<size_t>(p.a)]].push_back(&p);
  {
    StagedFile report(o.report);
    for (size_t g = 0; g < grouped.size();) {
      size_t g_end = g + 1;
      while (g_end < grouped.size() &&
             root[static_cast<size_t>(grouped[g_end])] == root[static_cast<size_t>(grouped[g])])
        ++g_end;
      const std::vector<int64_t> m(grouped.begin() + static_cast<std::ptrdiff_t>(g),
                                   grouped.begin() + static_cast<std::ptrdiff_t>(g_end));
      const int64_t r = root[static_cast<size_t>(grouped[g])];
      g = g_end;
      ++stats.groups;
      int64_t best = m[0];
      for (const int64_t d : m)
        if (keeps_before(docs[static_cast<size_t>(d)], docs[static_cast<size_t>(best)])) best = d;
      std::string list = "[";
      for (const int64_t d : m) {
        if (d != best) keep[static_cast<size_t>(d)] = 0;
        if (list.size() > 1) list += ", ";
        list += doc_json(docs[static_cast<size_t>(d)], o, exact_dup[static_cast<size_t>(d)]);
      }
      list += "]";
      // Pairs by their members' positions in `members`.
      std::string pairs = "[";
      for (const Pair* p : pairs_of[r]) {
        const auto pos = [&](int64_t d) {
          return std::lower_bound(m.begin(), m.end(), d) - m.begin();
        };
        if (pairs.size() > 1) pairs += ", ";
        pairs += JsonLine()
                     .add("a", static_cast<int64_t>(pos(p->a)))
                     .add("b", static_cast<int64_t>(pos(p->b)))
                     .add("jaccard", p->jaccard)
                     .str();
      }
      pairs += "]";
      const std::string line = JsonLine()
                                   .add("group", stats.groups - 1)
                                   .add("size", static_cast<int64_t>(m.size()))
                                   .add_raw("kept", doc_json(docs[static_cast<size_t>(best)], o,
                                                             exact_dup[static_cast<size_t>(best)]))
                                   .add_raw("members", list)
                                   .add_raw("pairs", pairs)
                                   .str() +
                               "\n";
      report.write(line.data(), line.size());
    }
    report.commit();
  }

  // ---- each document's fate, a file per shard; the counts; the kept records ----
  for (size_t f = 0; f < o.inputs.size(); ++f) {
    DatasetCounts& c = stats.datasets[o.inputs[f].dataset];
    std::string status;
    for (int64_t d = first_doc[f]; d < first_doc[f + 1]; ++d) {
      ++c.documents;
      char st = kKept;
      if (keep[static_cast<size_t>(d)]) {
        ++c.kept;
      } else if (exact_dup[static_cast<size_t>(d)]) {
        ++c.exact_removed;
        st = kExactRemoved;
      } else {
        ++c.fuzzy_removed;
        st = kFuzzyRemoved;
      }
      status.push_back(st);
    }
    write_whole_file(keep_path(f), status);
  }
  if (o.step == DedupStep::kAll)
    for (size_t f = 0; f < o.inputs.size(); ++f) write_kept(o, f, keep_path(f), batch_bytes);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::string body = "{";
    for (const auto& [name, c] : stats.datasets) {
      if (body.size() > 1) body += ", ";
      body += json_string(name) + ": " +
              JsonLine()
                  .add("documents", c.documents)
                  .add("kept", c.kept)
                  .add("exact_duplicates_removed", c.exact_removed)
                  .add("fuzzy_duplicates_removed", c.fuzzy_removed)
                  .add("bad_records_skipped", c.skipped)
                  .str();
    }
    body += "}";
    const std::string summary = JsonLine()
                                    .add("documents", stats.documents)
                                    .add("groups", stats.groups)
                                    .add("threshold", o.threshold)
                                    .add("num_perm", static_cast<int64_t>(o.num_perm))
                                    .add("seed", static_cast<int64_t>(o.seed))
                                    .add("hash", hash_family_name(o.family))
                                    .add("bands", static_cast<int64_t>(stats.bands))
                                    .add("rows", static_cast<int64_t>(stats.rows))
                                    .add("candidate_pairs", stats.candidate_pairs)
                                    .add("verified_pairs", stats.verified_pairs)
                                    .add("edges", stats.edges)
                                    .add_raw("datasets", body)
                                    .str() +
                                "\n";
    write_whole_file(o.output_dir + "/dedup_summary.json", summary);
  }
  return stats;
}

}  // namespace mtnlg::curate
