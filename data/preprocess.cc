#include "data/preprocess.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "core/status.h"
#include "data/gpt2_tokenizer.h"
#include "data/indexed_dataset_builder.h"
#include "data/json_reader.h"
#include "data/sentence_splitter.h"

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

// One output's share of a chunk: the documents' tokens back to back, each document's sequence
// count, and the sequences' lengths.
struct KeyTokens {
  std::vector<int32_t> tokens;
  std::vector<int32_t> sequence_lengths;  // [sequences]
  std::vector<int32_t> sequences;         // [documents]
};

// What a worker makes of a chunk: one KeyTokens per output (per --json-keys key; one otherwise).
struct ChunkResult {
  std::vector<KeyTokens> keys;
  std::vector<BadLine> bad_lines;
  bool stop_at_bad_line = false;  // the last bad line is fatal (no --skip-bad-lines)
  int64_t empty_documents = 0;    // of the first output
  int64_t bytes = 0;
  std::exception_ptr error;  // anything else that went wrong
};

// The keys whose text a jsonl line supplies, one output each.
std::vector<std::string> output_keys(const PreprocessOptions& opt) {
  if (!opt.json_keys.empty()) return opt.json_keys;
  return {opt.json_key};
}

// Megatron's Encoder.encode for one text: each (non-empty) sentence's tokens a sequence, <EOD>
// after the last one with append_eod, nothing at all for empty text.
void encode_document(const PreprocessOptions& opt, const Gpt2Tokenizer& tok,
                     Gpt2Tokenizer::Cache& cache, SentenceSplitter* splitter,
                     const std::string& text, KeyTokens* out) {
  int32_t count = 0;
  const auto add = [&](std::string_view sentence) {
    const size_t before = out->tokens.size();
    tok.encode(sentence, cache, &out->tokens);
    const size_t length = out->tokens.size() - before;
    if (length == 0) return;
    out->sequence_lengths.push_back(static_cast<int32_t>(length));
    ++count;
  };
  if (splitter != nullptr) {
    for (const std::string& sentence : splitter->split(text)) add(sentence);
  } else {
    add(text);
  }
  if (count > 0 && opt.append_eod) {
    out->tokens.push_back(tok.eod());
    ++out->sequence_lengths.back();
  }
  out->sequences.push_back(count);
}

// Parses and tokenizes one chunk; thread-safe given a cache and splitter per thread.
void process_chunk(const PreprocessOptions& opt, const Gpt2Tokenizer& tok,
                   Gpt2Tokenizer::Cache& cache, SentenceSplitter* splitter, DocumentChunk& chunk,
                   ChunkResult* out) {
  out->bytes = chunk.bytes;
  const std::vector<std::string> keys = output_keys(opt);
  out->keys.resize(opt.format == InputFormat::kJsonl ? keys.size() : 1);
  std::vector<std::string> texts(keys.size());
  for (size_t i = 0; i < chunk.records.size(); ++i) {
    if (opt.format == InputFormat::kJsonl) {
      // Every key of a line first, so that a bad line adds to no output.
      std::string reason;
      for (size_t k = 0; k < keys.size() && reason.empty(); ++k) {
        try {
          switch (parse_json_string_field(chunk.records[i], keys[k], &texts[k])) {
            case JsonFieldStatus::kFound:
              break;
            case JsonFieldStatus::kMissing:
              reason = "no key \"" + keys[k] + "\"";
              break;
            case JsonFieldStatus::kNotString:
              reason = "the value of \"" + keys[k] + "\" is not a string";
              break;
          }
        } catch (const Error& e) {
          reason = e.message();
        }
      }
      if (!reason.empty()) {
        out->bad_lines.push_back({chunk.line_numbers[i], reason});
        if (!opt.skip_bad_lines) {
          out->stop_at_bad_line = true;
          return;
        }
        continue;
      }
      for (size_t k = 0; k < keys.size(); ++k)
        encode_document(opt, tok, cache, splitter, texts[k], &out->keys[k]);
    } else {
      encode_document(opt, tok, cache, splitter, chunk.records[i], &out->keys[0]);
    }
    if (out->keys[0].sequences.back() == 0) ++out->empty_documents;
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
    std::unique_ptr<SentenceSplitter> splitter;
    if (opt_.split_sentences) splitter = std::make_unique<SentenceSplitter>(opt_.keep_newlines);
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
        process_chunk(opt_, tok_, cache, splitter.get(), chunk, &result);
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
  for (const std::string& key : opt.json_keys)
    if (key.empty()) throw invalid_argument("--json-keys names an empty key", "--json-keys");
  if (!opt.json_keys.empty() && opt.format != InputFormat::kJsonl)
    throw invalid_argument("--json-keys needs --input-format jsonl", "--json-keys");
}

}  // namespace

std::vector<std::string> preprocess_output_prefixes(const PreprocessOptions& opt) {
  if (opt.json_keys.empty()) return {opt.output_prefix};
  std::vector<std::string> out;
  const char* level = opt.split_sentences ? "sentence" : "document";
  for (const std::string& key : opt.json_keys)
    out.push_back(opt.output_prefix + "_" + key + "_" + level);
  return out;
}

PreprocessStats preprocess(const PreprocessOptions& opt) {
  validate(opt);
  DocumentReader reader(opt.input, opt.format);
  const auto tok = Gpt2Tokenizer::load(opt.vocab_file, opt.merge_file);
  PreprocessStats stats;
  stats.token_type = tok->vocab_size() < kUInt16VocabLimit ? TokenType::kUInt16 : TokenType::kInt32;
  stats.outputs = preprocess_output_prefixes(opt);
  std::vector<std::unique_ptr<IndexedDatasetBuilder>> builders;
  for (const std::string& prefix : stats.outputs)
    builders.push_back(std::make_unique<IndexedDatasetBuilder>(prefix, stats.token_type));
  IndexedDatasetBuilder& first = *builders.front();
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
                               output_keys(opt).front() + "\"" +
                               (opt.json_keys.size() > 1 ? " (and the other keys)" : ""));
      }
      if (++stats.skipped_lines <= kBadLinesLogged) {
        spdlog::warn("{}: skipped: {}", where, bad.reason);
      }
    }
    for (size_t k = 0; k < result.keys.size(); ++k) {
      const KeyTokens& kt = result.keys[k];
      size_t offset = 0, seq = 0;
      for (const int32_t count : kt.sequences) {
        const auto lengths =
            std::span<const int32_t>(kt.sequence_lengths).subspan(seq, static_cast<size_t>(count));
        size_t length = 0;
        for (const int32_t l : lengths) length += static_cast<size_t>(l);
        builders[k]->add_document(std::span<const int32_t>(kt.tokens).subspan(offset, length),
                                  lengths);
        offset += length;
        seq += static_cast<size_t>(count);
      }
    }
    stats.empty_documents += result.empty_documents;
    stats.input_bytes += result.bytes;
    progress.update(stats.input_bytes, first.num_documents(), first.num_tokens());
  }
  pipeline.stop();
  for (auto& b : builders) b->finish();
  progress.finish();
  stats.documents = first.num_documents();
  stats.sequences = first.num_sequences();
  stats.tokens = first.num_tokens();
  stats.seconds = progress.seconds();
  return stats;
}

}  // namespace mtnlg
