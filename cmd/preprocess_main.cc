// mtnlg-preprocess: tokenizes a corpus with GPT-2's BPE into a Megatron indexed dataset
// (PREFIX.bin + PREFIX.idx), with the flags of Megatron's tools/preprocess_data.py. Exit status
// as mtnlg-train's: 0 success; 2 a bad command line or a bad input line; 3 unsupported option
// value; 4 missing or corrupt input files (or an unwritable output); 1 anything else.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <string>

#include "cmd/cli_parse.h"
#include "core/logging.h"
#include "core/status.h"
#include "data/preprocess.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-preprocess: tokenize a corpus with GPT-2's byte-level BPE into a Megatron indexed "
      "dataset, PREFIX.bin + PREFIX.idx (uint16 tokens; int32 for vocabularies of 65500 or "
      "more), as Megatron-LM's tools/preprocess_data.py does (which names its output "
      "PREFIX_text_document: pass that as --output-prefix to match).\n"
      "Text is UTF-8; invalid bytes are read as U+FFFD (as Python's errors='replace' decode "
      "does). A document of empty text is recorded with no tokens (no <|endoftext|> either), as "
      "Megatron records it.\n"
      "Output is written under temporary names and renamed into place at the end; after an "
      "error nothing is left under the final names.\n"
      "Example: mtnlg-preprocess --input corpus.jsonl --output-prefix data/my_text_document "
      "--append-eod --workers 8\n"
      "Exit status: 0 done; 2 bad command line or bad input line; 3 unsupported; 4 missing or "
      "corrupt input file, or unwritable output; 1 other."};
  app.set_version_flag("--version", "mtnlg-preprocess 0.1.0");
  mtnlg::PreprocessOptions opt;
  std::string format = "jsonl";
  std::string tokenizer_type = "GPT2BPETokenizer";
  std::string dataset_impl = "mmap";
  std::string log_level = "info";
  bool no_progress_bar = false;
  app.add_option("--input", opt.input,
                 "Corpus file: JSON lines (one object per line, the document in --json-key) or, "
                 "with --input-format text, plain text whose documents are separated by blank "
                 "lines")
      ->required();
  app.add_option("--input-format", format,
                 "jsonl or text (text: a document is a block of lines up to a blank line, its "
                 "line ends included)")
      ->capture_default_str();
  auto* json_key =
      app.add_option("--json-key", opt.json_key, "jsonl: the member that holds the document text")
          ->capture_default_str();
  app.add_option("--json-keys", opt.json_keys,
                 "Megatron's form: one output per member, named PREFIX_KEY_document.{bin,idx} "
                 "(PREFIX_KEY_sentence with --split-sentences) as Megatron names them, e.g. "
                 "--json-keys text")
      ->excludes(json_key);
  app.add_option("--dataset-impl", dataset_impl,
                 "Accepted for Megatron compatibility: mmap, the format written (Megatron's "
                 "legacy lazy and cached formats are not supported)")
      ->capture_default_str();
  app.add_flag("--split-sentences", opt.split_sentences,
               "Each sentence a sequence of its document (ICU's sentence boundaries where "
               "Megatron uses NLTK punkt; docs/data.md says where they differ)");
  app.add_flag("--keep-newlines", opt.keep_newlines,
               "With --split-sentences: the whitespace after a sentence, newlines included, "
               "stays at its end (Megatron's --keep-newlines); else it is dropped");
  app.add_option("--output-prefix", opt.output_prefix,
                 "Writes PREFIX.bin and PREFIX.idx (the directory must exist)")
      ->required();
  app.add_option("--vocab-file", opt.vocab_file,
                 "GPT-2 encoder.json (default: data/gpt2/encoder.json if it exists in the current "
                 "directory, i.e. when run from the repository root)");
  app.add_option("--merge-file", opt.merge_file,
                 "GPT-2 vocab.bpe merges (default: data/gpt2/vocab.bpe, as --vocab-file)");
  app.add_option("--tokenizer-type", tokenizer_type,
                 "Accepted for Megatron compatibility; only GPT2BPETokenizer is supported")
      ->capture_default_str();
  app.add_flag("--append-eod", opt.append_eod,
               "End every document with <|endoftext|> (id 50256), as GPT training data needs");
  app.add_option("--workers", opt.workers,
                 "Tokenizing threads (1 to 1024); the output is the same for any count")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_flag("--skip-bad-lines", opt.skip_bad_lines,
               "jsonl: skip lines that are not a JSON object with a string --json-key (each is "
               "reported, then counted) instead of stopping at the first one");
  app.add_option("--log-interval", opt.log_interval,
                 "Documents between progress lines when stderr is not a terminal (on a "
                 "terminal a progress bar shows instead)")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_flag("--no-progress-bar", no_progress_bar,
               "Print progress lines even when stderr is a terminal");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  return mtnlg::exit_status_of([&] {
    mtnlg::init_logging(log_level);
    if (format == "jsonl") {
      opt.format = mtnlg::InputFormat::kJsonl;
    } else if (format == "text") {
      opt.format = mtnlg::InputFormat::kText;
    } else {
      throw mtnlg::invalid_argument("--input-format must be jsonl or text, got '" + format + "'");
    }
    if (dataset_impl != "mmap") {
      throw mtnlg::unsupported("--dataset-impl " + dataset_impl +
                               " is not supported; the fix: mmap (the default; Megatron-LM's "
                               "current format, the only one it still reads)");
    }
    if (tokenizer_type != "GPT2BPETokenizer") {
      throw mtnlg::unsupported("--tokenizer-type " + tokenizer_type +
                               " is not supported; the fix: GPT2BPETokenizer (the default)");
    }
    if (no_progress_bar) opt.progress = mtnlg::ProgressMode::kLines;
    opt.vocab_file =
        mtnlg::vocabulary_path(opt.vocab_file, "--vocab-file", "data/gpt2/encoder.json");
    opt.merge_file = mtnlg::vocabulary_path(opt.merge_file, "--merge-file", "data/gpt2/vocab.bpe");
    const mtnlg::PreprocessStats s = mtnlg::preprocess(opt);
    if (s.skipped_lines > 0) {
      spdlog::warn("skipped {} bad line(s) of {} (--skip-bad-lines)", s.skipped_lines, opt.input);
    }
    if (s.empty_documents > 0) {
      spdlog::warn("{} empty document(s): recorded with no tokens, as Megatron records them",
                   s.empty_documents);
    }
    std::string names;
    for (const std::string& prefix : s.outputs)
      names += (names.empty() ? "" : ", ") + prefix + ".{bin,idx}";
    spdlog::info(
        "wrote {}: {} documents, {} tokens ({}), {} sequences, {:.1f} MB in {:.1f} s "
        "({:.2f} MB/s)",
        names, s.documents, s.tokens, mtnlg::token_type_name(s.token_type), s.sequences,
        s.input_bytes / 1e6, s.seconds, s.seconds > 0 ? s.input_bytes / 1e6 / s.seconds : 0.0);
    return 0;
  });
}
