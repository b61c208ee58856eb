#include "data/curate/clean_stage.h"

#include <cld2/public/compact_lang_det.h>
#include <omp.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <chrono>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/python_text.h"
#include "data/curate/shard_writer.h"
#include "data/curate/staged_file.h"
#include "data/gpt2_tokenizer.h"

namespace CLD2 {
// lang_script.h (an internal header of libcld2-dev, which its public one does not include).
const char* LanguageCode(Language lang);
}  // namespace CLD2

namespace mtnlg::curate {

std::string normalize_text(const std::string& utf8) {
  bool ascii = true;
  for (const char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  std::u32string t;
  if (ascii) {
    t = utf8_to_u32(utf8);
  } else {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    const icu::UnicodeString n = nfc->normalize(
        icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size()))),
        status);
    if (U_FAILURE(status)) throw io_error(std::string("ICU NFC: ") + u_errorName(status));
    t.assign(static_cast<size_t>(n.countChar32()), U'\0');
    n.toUTF32(reinterpret_cast<UChar32*>(t.data()), static_cast<int32_t>(t.size()), status);
  }
  std::u32string out;
  out.reserve(t.size());
  for (const char32_t c : t)
    if (c == U'\t' || c == U'\n' || u_charType(static_cast<UChar32>(c)) != U_CONTROL_CHAR)
      out.push_back(c);
  return u32_to_utf8(out);
}

std::pair<std::string, double> detect_language(const std::string& utf8) {
  CLD2::Language top3[3];
  int percent3[3];
  int text_bytes = 0;
  bool reliable = false;
  const CLD2::Language lang = CLD2::ExtDetectLanguageSummary(
      utf8.data(), static_cast<int>(utf8.size()), true, top3, percent3, &text_bytes, &reliable);
  return {CLD2::LanguageCode(lang), top3[0] == lang ? percent3[0] / 100.0 : 0.0};
}

CleanStats run_clean(const CleanOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Gpt2Tokenizer> tokenizer;
  if (o.min_gpt2_tokens > 0) tokenizer = Gpt2Tokenizer::load(o.vocab_file, o.merge_file);
  TextRecords records(o.input, o.text_key, o.bad_records);
  ShardWriter out(o.output);
  PreprocessProgress progress(o.progress, records.file_size(), 100000);
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  CleanStats stats;
  std::vector<TextRecord> batch;
  struct Result {
    std::string text, removed_by, language;
  };
  std::vector<Result> results;
  while (records.next_batch(&batch, size_t{16} << 20)) {
    const auto n = static_cast<int64_t>(batch.size());
    results.assign(batch.size(), {});
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      Result& r = results[static_cast<size_t>(i)];
      r.text = normalize_text(batch[static_cast<size_t>(i)].text);
      const auto chars = static_cast<int64_t>(utf8_to_u32(r.text).size());
      if (o.min_chars > 0 && chars < o.min_chars) {
        r.removed_by = "min_chars";
      } else if (o.short_javascript > 0 && chars < o.short_javascript &&
                 u32_to_utf8(python_lower(utf8_to_u32(r.text))).find("javascript") !=
                     std::string::npos) {
        r.removed_by = "short_javascript";
      } else if (o.min_gpt2_tokens > 0 && chars < 8 * o.min_gpt2_tokens &&
                 static_cast<int64_t>(tokenizer->encode(r.text).size()) < o.min_gpt2_tokens) {
        r.removed_by = "min_gpt2_tokens";
      }
      if (!o.languages.empty()) {
        const auto [code, share] = detect_language(r.text);
        r.language = code;
        if (r.removed_by.empty()) {
          bool wanted = false;
          for (const std::string& l : o.languages) wanted = wanted || l == code;
          if (!wanted || share < o.min_language_score) r.removed_by = "language";
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const TextRecord& rec = batch[static_cast<size_t>(i)];
      Result& r = results[static_cast<size_t>(i)];
      ++stats.documents;
      if (!r.language.empty()) ++stats.languages[r.language];
      const bool changed = r.text != rec.text;
      stats.normalized += changed;
      if (!r.removed_by.empty()) {
        ++stats.removed[r.removed_by];
        continue;
      }
      ++stats.kept;
      out.write_line(changed ? rewrite_record(rec.raw, {{o.text_key, json_string(r.text)}})
                             : rec.raw);
    }
    progress.update(records.bytes_read(), stats.documents, -1);
  }
  progress.finish();
  out.commit();
  for (const auto& [why, k] : records.skipped()) stats.skipped += k;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.report.empty()) {
    const auto object = [](const std::map<std::string, int64_t>& m) {
      std::string s = "{";
      for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + json_string(k) + ": " + std::to_string(v);
      return s + "}";
    };
    const std::string line = JsonLine()
                                 .add("input", o.input)
                                 .add("documents", stats.documents)
                                 .add("kept", stats.kept)
                                 .add("normalized", stats.normalized)
                                 .add_raw("removed", object(stats.removed))
                                 .add_raw("languages", object(stats.languages))
                                 .add("bad_records_skipped", stats.skipped)
                                 .str() +
                             "\n";
    StagedFile f(o.report);
    f.write(line.data(), line.size());
    f.commit();
  }
  return stats;
}

}  // namespace mtnlg::curate
