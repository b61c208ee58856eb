#include "data/preprocess.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/status.h"
#include "data/gpt2_tokenizer.h"
#include "data/indexed_dataset_builder.h"
#include "data/json_reader.h"

namespace mtnlg {

namespace {

// Megatron picks uint16 below this vocabulary size (megatron/core/datasets/indexed_dataset.py).
constexpr int32_t kUInt16VocabLimit = 65500;
// Bad lines named one by one in the log before only counting.
constexpr int64_t kBadLinesLogged = 10;

struct BadLine {
  int64_t line = 0;
  std::string reason;
};

// What a worker makes of a chunk: the documents' tokens back to back.
struct ChunkResult {
  std::vector<int32_t> tokens;
  std::vector<int32_t> lengths;  // [documents]
  std::vector<BadLine> bad_lines;
  bool stop_at_bad_line = false;  // the last bad line is fatal (no --skip-bad-lines)
  int64_t empty_documents = 0;
  int64_t bytes = 0;
  std::exception_ptr error;  // anything else that went wrong
};

// Parses and tokenizes one chunk; thread-safe given a cache per thread.
void process_chunk(const PreprocessOptions& opt, const Gpt2Tokenizer& tok,
                   Gpt2Tokenizer::Cache& cache, DocumentChunk& chunk, ChunkResult* out) {
  out->bytes = chunk.bytes;
  std::string text;
  for (size_t i = 0; i < chunk.records.size(); ++i) {
    const std::string* doc = &chunk.records[i];
    if (opt.format == InputFormat::kJsonl) {
      std::string reason;
      try {
        switch (parse_json_string_field(chunk.records[i], opt.json_key, &text)) {
          case JsonFieldStatus::kFound:
            break;
          case JsonFieldStatus::kMissing:
            reason = "no key \"" + opt.json_key + "\"";
            break;
          case JsonFieldStatus::kNotString:
            reason = "the value of \"" + opt.json_key + "\" is not a string";
            break;
        }
      } catch (const Error& e) {
        reason = e.message();
      }
      if (!reason.empty()) {
        out->bad_lines.push_back({chunk.line_numbers[i], reason});
        if (!opt.skip_bad_lines) {
          out->stop_at_bad_line = true;
          return;
        }
        continue;
      }
      doc = &text;
    }
    const size_t before = out->tokens.size();
    tok.encode(*doc, cache, &out->tokens);
    if (opt.append_eod) out->tokens.push_back(tok.eod());
    const size_t length = out->tokens.size() - before;
    if (length == 0) {
      ++out->empty_documents;
    } else {
      out->lengths.push_back(static_cast<int32_t>(length));
    }
  }
}

// The reader, the workers and the writer (the calling thread) share this state.
class Pipeline {
 public:
  Pipeline(const PreprocessOptions& opt, const Gpt2Tokenizer& tok, DocumentReader& reader)
      : opt_(opt), tok_(tok), reader_(reader), max_in_flight_(2 * opt.workers + 2) {}

  ~Pipeline() { stop(); }

  void start() {
    threads_.emplace_back([this] { read_loop(); });
    for (int w = 0; w < opt_.workers; ++w) threads_.emplace_back([this] { work_loop(); });
  }

  // Blocks until chunk `index` is done; false when the input is exhausted before it.
  // Rethrows the reader's error.
  bool wait_result(int64_t index, ChunkResult* out) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      return results_.count(index) > 0 || reader_error_ || (read_done_ && index >= chunks_read_);
    });
    if (const auto it = results_.find(index); it != results_.end()) {
      *out = std::move(it->second);
      results_.erase(it);
      ++written_;
      cv_.notify_all();  // room for the reader
      return true;
    }
    if (reader_error_) std::rethrow_exception(reader_error_);
    return false;
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

 private:
  void read_loop() {
    try {
      while (true) {
        {
          std::unique_lock lock(mu_);
          cv_.wait(lock, [&] { return stopping_ || chunks_read_ - written_ < max_in_flight_; });
          if (stopping_) return;
        }
        DocumentChunk chunk;
        const bool more = reader_.next(opt_.chunk_bytes, &chunk);
        std::lock_guard lock(mu_);
        if (!more) {
          read_done_ = true;
          cv_.notify_all();
          return;
        }
        queue_.push_back(std::move(chunk));
        ++chunks_read_;
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mu_);
      reader_error_ = std::current_exception();
      cv_.notify_all();
    }
  }

  void work_loop() {
    Gpt2Tokenizer::Cache cache;
    while (true) {
      DocumentChunk chunk;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || read_done_ || reader_error_; });
        if (stopping_ || queue_.empty()) return;  // stopped, or nothing more will come
        chunk = std::move(queue_.front());
        queue_.pop_front();
      }
      ChunkResult result;
      try {
        process_chunk(opt_, tok_, cache, chunk, &result);
      } catch (...) {
        result.error = std::current_exception();
      }
      std::lock_guard lock(mu_);
      results_.emplace(chunk.index, std::move(result));
      cv_.notify_all();
    }
  }

  const PreprocessOptions& opt_;
  const Gpt2Tokenizer& tok_;
  DocumentReader& reader_;
  const int64_t max_in_flight_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<DocumentChunk> queue_;         // read, not yet taken by a worker
  std::map<int64_t, ChunkResult> results_;  // done, not yet written
  int64_t chunks_read_ = 0;
  int64_t written_ = 0;
  bool read_done_ = false;
  bool stopping_ = false;
  std::exception_ptr reader_error_;
  std::vector<std::thread> threads_;
};

void validate(const PreprocessOptions& opt) {
  if (opt.workers < 1) {
    throw invalid_argument("--workers must be at least 1, got " + std::to_string(opt.workers));
  }
  if (opt.output_prefix.empty()) throw invalid_argument("--output-prefix is required");
  // "dir/" would write dir/.bin and dir/.idx: hidden files no recipe names.
  const std::string base = std::filesystem::path(opt.output_prefix).filename().string();
  if (base.empty() || base == "." || base == "..")
    throw invalid_argument("'" + opt.output_prefix +
                               "' names a directory, not a file prefix; add the dataset's name, "
                               "e.g. " +
                               opt.output_prefix + (opt.output_prefix.back() == '/' ? "" : "/") +
                               "my_text_document",
                           "--output-prefix");
  if (opt.format == InputFormat::kJsonl && opt.json_key.empty()) {
    throw invalid_argument("--json-key must not be empty");
  }
}

}  // namespace

PreprocessStats preprocess(const PreprocessOptions& opt) {
  validate(opt);
  DocumentReader reader(opt.input, opt.format);
  const auto tok = Gpt2Tokenizer::load(opt.vocab_file, opt.merge_file);
  PreprocessStats stats;
  stats.token_type = tok->vocab_size() < kUInt16VocabLimit ? TokenType::kUInt16 : TokenType::kInt32;
  IndexedDatasetBuilder builder(opt.output_prefix, stats.token_type);
  PreprocessProgress progress(opt.progress, reader.file_size(), opt.log_interval);

  Pipeline pipeline(opt, *tok, reader);
  pipeline.start();
  ChunkResult result;
  for (int64_t index = 0; pipeline.wait_result(index, &result); ++index) {
    if (result.error) std::rethrow_exception(result.error);
    for (const BadLine& bad : result.bad_lines) {
      const std::string where = opt.input + ":" + std::to_string(bad.line);
      if (result.stop_at_bad_line && &bad == &result.bad_lines.back()) {
        throw invalid_argument(where + ": " + bad.reason +
                               "; the fix: repair the line, or pass --skip-bad-lines to skip "
                               "lines that are not a JSON object with a string \"" +
                               opt.json_key + "\"");
      }
      if (++stats.skipped_lines <= kBadLinesLogged) {
        spdlog::warn("{}: skipped: {}", where, bad.reason);
      }
    }
    size_t offset = 0;
    for (const int32_t length : result.lengths) {
      builder.add_document(std::span<const int32_t>(result.tokens).subspan(offset, length));
      offset += static_cast<size_t>(length);
    }
    stats.empty_documents += result.empty_documents;
    stats.input_bytes += result.bytes;
    progress.update(stats.input_bytes, builder.num_documents(), builder.num_tokens());
  }
  pipeline.stop();
  builder.finish();
  progress.finish();
  stats.documents = builder.num_documents();
  stats.tokens = builder.num_tokens();
  stats.seconds = progress.seconds();
  return stats;
}

}  // namespace mtnlg
