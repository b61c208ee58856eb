// preprocess(): tokenizes a corpus file with GPT-2's BPE into a Megatron indexed dataset
// (PREFIX.bin + PREFIX.idx), as Megatron's tools/preprocess_data.py does; the engine of the
// mtnlg-preprocess executable.
//
// Pipeline: a reader thread cuts the input into chunks of about 1 MB (data/document_reader.h),
// `workers` threads parse and tokenize chunks (each with its own BPE cache), and the calling
// thread writes the results in input order through IndexedDatasetBuilder. At most
// 2 * workers + 2 chunks are in flight, so memory stays bounded whatever the input size. The
// output is committed (renamed into place) only after the whole input succeeded; on any error
// nothing is left under the final names. The output bytes do not depend on `workers`.
//
// Thread safety: preprocess() may run concurrently with itself on different outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/document_reader.h"
#include "data/indexed_format.h"
#include "data/preprocess_progress.h"

namespace mtnlg {

struct PreprocessOptions {
  std::string input;  // corpus file
  InputFormat format = InputFormat::kJsonl;
  std::string json_key = "text";  // jsonl: the member holding the document
  // Megatron's --json-keys: one output per key, named PREFIX_KEY_document (PREFIX_KEY_sentence
  // with split_sentences) as Megatron names them; empty: one output, PREFIX, from json_key.
  std::vector<std::string> json_keys;
  std::string output_prefix;     // writes PREFIX.bin and PREFIX.idx (see json_keys)
  std::string vocab_file;        // GPT-2 encoder.json
  std::string merge_file;        // GPT-2 vocab.bpe
  bool append_eod = false;       // end every non-empty document with <|endoftext|>
  bool split_sentences = false;  // one sequence per sentence (data/sentence_splitter.h)
  bool keep_newlines = false;    // with split_sentences: whitespace stays at a sentence's end
  int workers = 1;               // tokenizing threads (>= 1)
  bool skip_bad_lines = false;   // jsonl: skip (and count) lines that are not a usable object
  ProgressMode progress = ProgressMode::kAuto;
  int64_t log_interval = 100000;         // documents between plain progress lines
  size_t chunk_bytes = size_t{1} << 20;  // input bytes per chunk handed to a worker
};

// Of the first output (per key, the counts differ only in tokens and sequences).
struct PreprocessStats {
  std::vector<std::string> outputs;  // the prefixes written
  int64_t documents = 0;             // written, empty ones included
  int64_t sequences = 0;             // one per non-empty document, or per sentence
  int64_t tokens = 0;                // written, EOD included
  int64_t skipped_lines = 0;         // bad jsonl lines skipped (--skip-bad-lines)
  // Documents with no tokens (empty text: no EOD either), recorded with no sequences as
  // Megatron records them.
  int64_t empty_documents = 0;
  int64_t input_bytes = 0;
  TokenType token_type = TokenType::kUInt16;
  double seconds = 0;
};

// The prefixes preprocess() writes for `options`.
std::vector<std::string> preprocess_output_prefixes(const PreprocessOptions& options);

// Runs the whole conversion. Throws not_found for a missing input or vocabulary file,
// invalid_argument for a bad jsonl line (naming file:line and the fix, --skip-bad-lines) or bad
// options, corruption for malformed vocabulary files, io_error for write failures.
PreprocessStats preprocess(const PreprocessOptions& options);

}  // namespace mtnlg
