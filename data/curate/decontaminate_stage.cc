#include "data/curate/decontaminate_stage.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/shard_writer.h"
#include "data/curate/staged_file.h"
#include "data/json_reader.h"

namespace mtnlg::curate {

std::vector<std::string> task_text_fields(const std::string& task) {
  static const std::map<std::string, std::vector<std::string>> fields = {
      {"lambada", {"text"}},
      {"piqa", {"goal"}},
      {"squad", {"question"}},
      {"triviaqa", {"question"}},
      {"webqa", {"question"}},
      {"race", {"question"}},
      {"drop", {"question"}},
      {"boolq", {"question", "passage"}},
      {"hellaswag", {"ctx"}},
      {"winogrande", {"sentence"}},
      {"anli", {"premise", "hypothesis"}},
      {"hans", {"premise", "hypothesis"}},
      {"wic", {"sentence1", "sentence2"}},
      {"natural_questions", {"question.text"}},
      {"coqa", {"questions[]"}}};
  const auto it = fields.find(task);
  if (it != fields.end()) return it->second;
  std::string known;
  for (const auto& [name, f] : fields) known += (known.empty() ? "" : ", ") + name;
  throw invalid_argument("--task-file " + task + ": unknown task; the fix: one of " + known,
                         "--task-file");
}

std::vector<std::string> task_texts(std::string_view line, const std::string& spec) {
  std::vector<std::string> out;
  const size_t dot = spec.find('.');
  const bool array = spec.size() > 2 && spec.ends_with("[]");
  if (dot == std::string::npos && !array) {
    std::string text;
    if (parse_json_string_field(line, spec, &text) == JsonFieldStatus::kFound)
      out.push_back(std::move(text));
    return out;
  }
  const std::string outer = array ? spec.substr(0, spec.size() - 2) : spec.substr(0, dot);
  const std::vector<JsonMember> members = parse_json_object_members(line);
  const JsonMember* m = nullptr;
  for (const JsonMember& x : members)
    if (x.key == outer) m = &x;  // the last wins
  if (m == nullptr) return out;
  if (array) {
    if (auto strings = parse_json_string_array(m->raw)) out = std::move(*strings);
    return out;
  }
  if (m->raw.empty() || m->raw.front() != '{') return out;
  std::string text;
  if (parse_json_string_field(m->raw, spec.substr(dot + 1), &text) == JsonFieldStatus::kFound)
    out.push_back(std::move(text));
  return out;
}

namespace {

// The record with the text replaced by `piece` and split_id added, or extended as the script
// extends it (OLD-NEW).
std::string piece_line(const TextRecord& r, const std::string& key, const std::string& piece,
                       const std::string& split_id, const std::string& where) {
  std::string old_id;
  const JsonFieldStatus st = parse_json_string_field(r.raw, "split_id", &old_id);
  if (st == JsonFieldStatus::kNotString)
    throw invalid_argument("its split_id is not a string", where);
  const std::string id = (st == JsonFieldStatus::kFound ? old_id + "-" : std::string()) + split_id;
  return rewrite_record(r.raw, {{key, json_string(piece)}, {"split_id", json_string(id)}});
}

}  // namespace

DecontaminateStats run_decontaminate(const DecontaminateOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  DecontaminateStats stats;
  if (o.task_files.empty())
    throw invalid_argument("decontaminate needs at least one --task-file TASK=FILE", "--task-file");
  TaskNgrams grams(o.filter);
  std::string prefix;
  for (const auto& [task, file] : o.task_files) {
    const std::vector<std::string> fields = task_text_fields(task);
    prefix += (prefix.empty() ? "" : "-") + task;
    LineReader reader(file);
    std::string line;
    while (reader.next(&line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      for (const std::string& f : fields) {
        std::vector<std::string> texts;
        try {
          texts = task_texts(line, f);
        } catch (const Error& e) {
          throw invalid_argument("not a JSON object: " + e.message(),
                                 file + ":" + std::to_string(reader.line_number()));
        }
        for (const std::string& text : texts) grams.add_task_text(text);
      }
    }
  }
  stats.task_ngrams = grams.size();
  spdlog::info("decontaminate: {} task n-grams from {} task file(s)", grams.size(),
               o.task_files.size());
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  const auto batch_bytes = static_cast<size_t>(o.batch_mb) << 20;
  std::vector<TextRecord> batch;

  // Pass 1: in how many documents each n-gram is hit. A document without a hit there has none
  // in pass 2 either (pass 2 looks, at the same places, for a subset of the n-grams), so pass 2
  // writes it whole without scanning it again.
  std::vector<char> was_hit;
  {
    TextRecords records(o.input, o.text_key, o.bad_records);
    PreprocessProgress progress(o.progress, records.file_size(), 100000);
    std::vector<std::vector<int64_t>> hits;
    int64_t docs = 0;
    while (records.next_batch(&batch, batch_bytes)) {
      hits.assign(batch.size(), {});
      const auto n = static_cast<int64_t>(batch.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
      for (int64_t i = 0; i < n; ++i)
        hits[static_cast<size_t>(i)] = grams.hits(batch[static_cast<size_t>(i)].text);
      for (const auto& h : hits) {
        grams.count(h);
        was_hit.push_back(h.empty() ? 0 : 1);
      }
      docs += n;
      progress.update(records.bytes_read(), docs, -1);
    }
    progress.finish();
    for (const auto& [why, n] : records.skipped()) {
      stats.skipped += n;
      spdlog::warn("skipped {} record(s) of {}: {} (--bad-records skip)", n, o.input, why);
    }
  }
  grams.keep_below_threshold();
  stats.ngrams_below_threshold = grams.active();
  spdlog::info("decontaminate: {} of {} n-grams hit in fewer than {} documents are removed",
               stats.ngrams_below_threshold, stats.task_ngrams, o.filter.key_threshold);

  // Pass 2: cut, and write the pieces.
  {
    TextRecords records(o.input, o.text_key, BadRecords::kSkip);
    ShardWriter out(o.output);
    PreprocessProgress progress(o.progress, records.file_size(), 100000);
    std::vector<std::vector<std::string>> pieces;
    size_t doc = 0;
    while (records.next_batch(&batch, batch_bytes)) {
      pieces.assign(batch.size(), {});
      const auto n = static_cast<int64_t>(batch.size());
      MTNLG_CHECK_MSG(doc + batch.size() <= was_hit.size(),
                      "decontaminate: " << o.input << " changed between its two passes");
#pragma omp parallel for num_threads(threads) schedule(dynamic, 8)
      for (int64_t i = 0; i < n; ++i) {
        const std::string& text = batch[static_cast<size_t>(i)].text;
        pieces[static_cast<size_t>(i)] = was_hit[doc + static_cast<size_t>(i)]
                                             ? grams.clean(text)
                                             : std::vector<std::string>{text};
      }
      doc += batch.size();
      for (int64_t i = 0; i < n; ++i) {
        const TextRecord& r = batch[static_cast<size_t>(i)];
        std::vector<std::string>& p = pieces[static_cast<size_t>(i)];
        ++stats.documents;
        if (p.size() > 1) ++stats.split;
        if (p.empty()) ++stats.removed;
        if (p.size() == 1 && p[0].size() < r.text.size()) ++stats.trimmed;
        if (static_cast<int64_t>(p.size()) > o.filter.splits_count) {
          ++stats.too_many_splits;
          continue;
        }
        for (size_t k = 0; k < p.size(); ++k) {
          char id[48];
          std::snprintf(id, sizeof id, "-%010lld-%04zu", static_cast<long long>(r.line), k);
          out.write_line(
              piece_line(r, o.text_key, p[k], prefix + id, o.input + ":" + std::to_string(r.line)));
          ++stats.pieces;
        }
      }
      progress.update(records.bytes_read(), stats.documents, -1);
    }
    progress.finish();
    out.commit();
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.report.empty()) {
    const std::string line = JsonLine()
                                 .add("input", o.input)
                                 .add("task_ngrams", stats.task_ngrams)
                                 .add("ngrams_below_threshold", stats.ngrams_below_threshold)
                                 .add("documents", stats.documents)
                                 .add("pieces_written", stats.pieces)
                                 .add("documents_split", stats.split)
                                 .add("documents_removed", stats.removed)
                                 .add("documents_over_split_limit", stats.too_many_splits)
                                 .add("documents_trimmed", stats.trimmed)
                                 .add("bad_records_skipped", stats.skipped)
                                 .str() +
                             "\n";
    write_whole_file(o.report, line);
  }
  return stats;
}

}  // namespace mtnlg::curate
