// mtnlg-curate: the corpus pipeline of the MT-NLG paper, a subcommand per stage, each reading
// and writing JSON Lines shards (docs/curation.md). Exit status as every mtnlg executable's:
// 0 done; 2 a bad command line or bad input record; 3 unsupported; 4 a missing, truncated or
// corrupt file, or unwritable output; 1 anything else.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "core/logging.h"
#include "core/status.h"
#include "data/curate/clean_stage.h"
#include "data/curate/decontaminate_stage.h"
#include "data/curate/dedup_stage.h"
#include "data/curate/extract_stage.h"
#include "data/curate/minhash_stage.h"
#include "data/curate/pipeline.h"
#include "data/curate/quality_stage.h"

namespace {

// Options every stage shares.
struct Common {
  std::string text_key = "text";
  std::string bad_records = "error";
  int threads = 0;
  bool no_progress_bar = false;
  std::string log_level = "info";
};

// --threads, --no-progress-bar, --log-level: every subcommand's.
void add_run_options(CLI::App& app, Common& c) {
  app.add_option("--threads", c.threads,
                 "Worker threads (0: every core); output bytes do not "
                 "depend on it")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_flag("--no-progress-bar", c.no_progress_bar,
               "Progress as plain lines even when stderr is a terminal");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
}

// Those and the record options of the stages that read JSON Lines shards.
void add_common(CLI::App& app, Common& c) {
  app.add_option("--text-key", c.text_key, "The JSON member that holds each document's text")
      ->capture_default_str();
  app.add_option("--bad-records", c.bad_records,
                 "A record that is not JSON, lacks --text-key, has a non-string text or invalid "
                 "UTF-8: error (stop, naming file and line) or skip (skip it and count it in the "
                 "report)")
      ->capture_default_str();
  add_run_options(app, c);
}

// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

mtnlg::ProgressMode progress_mode(const Common& c) {
  return c.no_progress_bar ? mtnlg::ProgressMode::kLines : mtnlg::ProgressMode::kAuto;
}

void log_skipped(const std::map<std::string, int64_t>& skipped, const std::string& file) {
  for (const auto& [why, n] : skipped)
    spdlog::warn("skipped {} record(s) of {}: {} (--bad-records skip)", n, file, why);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-curate: the corpus pipeline of Megatron-Turing NLG 530B, a subcommand per stage "
      "over JSON Lines shards (plain, .gz or .zst; the text in --text-key, other keys carried "
      "through). docs/curation.md describes every stage.\n"
      "Exit status: 0 done; 2 bad command line or bad input record; 3 unsupported; 4 missing, "
      "truncated or corrupt input file, or unwritable output; 1 other."};
  app.set_version_flag("--version", "mtnlg-curate 0.1.0");
  app.require_subcommand(1);

  // dedup
  mtnlg::curate::DedupOptions dd;
  Common dd_common;
  std::string dd_hash = "xxh3", dd_priority;
  std::vector<std::string> dd_inputs;
  CLI::App* dedup = app.add_subcommand(
      "dedup",
      "Fuzzy deduplication across datasets with MinHash LSH (`dedup minhash`: one "
      "shard's signatures)");
  dedup->footer(
      "Fuzzy deduplication across datasets with MinHash LSH, as MT-NLG's corpus was built: "
      "documents whose normalized texts are identical are grouped by hash first; the others' "
      "signatures are cut into b bands of r rows (datasketch's optimal (b, r) for --threshold "
      "unless --bands/--rows), documents sharing a band are candidates, every candidate pair is "
      "verified by the exact Jaccard similarity of the shingle sets, pairs at or above the "
      "threshold are edges, and each connected component keeps one document: the one whose "
      "dataset comes first in --priority, ties by the input file's position, then line number. "
      "Writes OUTPUT_DIR/NAME/<file name> per input (the kept lines unchanged), the --report "
      "(a JSON line per group: members, the kept one, the verified pairs and their similarity) "
      "and OUTPUT_DIR/dedup_summary.json (per dataset: documents, kept, removed as exact and as "
      "fuzzy duplicates). `dedup minhash` writes one shard's signatures. Example: mtnlg-curate "
      "dedup --input wiki=wiki.jsonl --input cc=cc-00.jsonl.zst --input cc=cc-01.jsonl.zst "
      "--priority wiki,cc --threshold 0.8 --output-dir dedup --report dedup/groups.jsonl");
  dedup->require_subcommand(0, 1);
  dedup->add_option("--input", dd_inputs,
                    "NAME=FILE: a shard of dataset NAME (repeat the flag; a dataset may have "
                    "several shards)");
  dedup->add_option("--priority", dd_priority,
                    "Every dataset, comma-separated, the one whose documents are kept first "
                    "first (the paper keeps the highest-quality dataset's copy)");
  dedup
      ->add_option("--threshold", dd.threshold,
                   "Jaccard similarity at or above which two documents are duplicates")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  dedup->add_option("--num-perm", dd.num_perm, "MinHash functions (signature length)")
      ->check(CLI::Range(2, 65536))
      ->capture_default_str();
  dedup->add_option("--seed", dd.seed, "Seed of the hash functions")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  dedup->add_option("--hash", dd_hash, "xxh3 (fast) or datasketch (datasketch's exact values)")
      ->capture_default_str();
  dedup->add_option("--bands", dd.bands,
                    "LSH bands b (with --rows; default: datasketch's _optimal_param(threshold, "
                    "num_perm, 0.5, 0.5))");
  dedup->add_option("--rows", dd.rows, "LSH rows per band r (with --bands)");
  dedup->add_option("--output-dir", dd.output_dir, "Where the kept shards and the summary go");
  dedup->add_option("--report", dd.report, "The groups' JSON Lines report");
  std::string dd_step = "all";
  dedup
      ->add_option("--step", dd_step,
                   "all (one process), or a cluster's steps meeting through --work-dir: "
                   "signatures (an array task per shard set), components (one task: groups, "
                   "report, summary), output (an array task per shard set); "
                   "scripts/slurm/curate.sbatch runs them")
      ->capture_default_str();
  dedup
      ->add_option("--task-index", dd.task_index,
                   "With --step signatures or output: this task's index (shard f is task f % "
                   "count's), e.g. $SLURM_ARRAY_TASK_ID")
      ->capture_default_str();
  dedup
      ->add_option("--task-count", dd.task_count,
                   "With --step signatures or output: the number of tasks, e.g. "
                   "$SLURM_ARRAY_TASK_COUNT")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  dedup->add_option("--work-dir", dd.work_dir,
                    "Where the steps leave their files (default OUTPUT_DIR/.work; shared storage "
                    "on a cluster)");
  dedup->add_option("--batch-mb", dd.batch_mb, "Megabytes of records read at a time")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  dedup
      ->add_option(
          "--memory-mb", dd.memory_mb,
          "The components step's memory budget: it estimates its need (96 bytes a "
          "document, three batches and 16 MB) from the signature files and refuses a larger "
          "one before allocating (exit 2); candidates' texts go to a scratch file in "
          "--work-dir. 0: no budget")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  add_common(*dedup, dd_common);

  // dedup minhash
  mtnlg::curate::MinhashOptions mh;
  Common mh_common;
  std::string mh_hash = "xxh3";
  CLI::App* minhash = dedup->add_subcommand(
      "minhash", "MinHash signatures of one shard's documents, as a uint32 .npy");
  minhash->footer(
      "MinHash signatures of a shard's documents: a uint32 [documents, num_perm] .npy (row i the "
      "i-th record; blank lines are not records). Shingles: character 5-grams (code points) of "
      "the text after NFC, Python's str.lower() and whitespace runs collapsed to one space, "
      "stripped; a text shorter than 5 code points is one shingle. --hash datasketch is bit for "
      "bit Python datasketch's MinHash(num_perm, seed) fed each distinct shingle's UTF-8 bytes; "
      "xxh3 (the default) is the same estimator with faster hash functions (XXH3-64, then "
      "multiply-add-shift). Example: mtnlg-curate dedup minhash --input web.jsonl.zst --output "
      "web.npy --hash datasketch --num-perm 128 --seed 1");
  minhash->add_option("--input", mh.input, "The shard: .jsonl, .jsonl.gz or .jsonl.zst")
      ->required();
  minhash
      ->add_option("--output", mh.output,
                   "The signatures' .npy (written as OUTPUT.tmp, renamed when complete)")
      ->required();
  minhash->add_option("--hash", mh_hash, "xxh3 (fast) or datasketch (datasketch's exact values)")
      ->capture_default_str();
  minhash->add_option("--num-perm", mh.num_perm, "Hash functions (signature length)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  minhash->add_option("--seed", mh.seed, "Seed of the hash functions (numpy RandomState's)")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  minhash
      ->add_option("--batch-mb", mh.batch_mb,
                   "Megabytes of records read and signed at a time (the memory bound)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  add_common(*minhash, mh_common);

  // decontaminate
  mtnlg::curate::DecontaminateOptions dc;
  Common dc_common;
  std::vector<std::string> dc_tasks;
  CLI::App* decon =
      app.add_subcommand("decontaminate",
                         "Remove downstream-task text by 13-gram matching, as Megatron-LM's "
                         "filter_ngrams.py does");
  decon->footer(
      "Removes downstream-task text from a training shard exactly as Megatron-LM's "
      "tools/openwebtext/filter_ngrams.py does with its defaults, quirks included: the task "
      "texts' 13-grams (a task text of 8 to 12 words whole; fewer than 8 words: nothing), words "
      "being \\w+ of the lower-cased text; pass 1 counts in how many documents each is hit; pass "
      "2 cuts every document at the hits of the n-grams hit in fewer than --key-threshold "
      "documents, keeping the text up to a sentence end 200 characters before a hit and going on "
      "after a sentence end 200 characters past it, pieces of 200 characters or fewer dropped; a "
      "document of more than --splits-count pieces is dropped; a text of fewer than 13 words is "
      "never cut. Each piece is written as its record with the text replaced and a split_id "
      "(TASKS-LINE-PIECE) added; other members are carried through. docs/curation.md has the "
      "details. Example: mtnlg-curate decontaminate --input cc.jsonl.zst --output "
      "cc.clean.jsonl.zst --task-file lambada=lambada_test.jsonl --task-file "
      "piqa=piqa_valid.jsonl");
  decon->add_option("--input", dc.input, "The training shard (.jsonl, .gz, .zst)")->required();
  decon
      ->add_option("--output", dc.output,
                   "The decontaminated shard (written as OUTPUT.tmp, "
                   "renamed when complete)")
      ->required();
  decon
      ->add_option("--task-file", dc_tasks,
                   "TASK=FILE, repeatable, in order (the split_id's task prefix follows it): a "
                   "task's JSON Lines with lm-evaluation-harness's field names. Tasks: lambada "
                   "(text), piqa (goal), squad, triviaqa, webqa, race, drop (question), boolq "
                   "(question, passage), hellaswag (ctx), winogrande (sentence), anli and hans "
                   "(premise, hypothesis), wic (sentence1, sentence2), natural_questions "
                   "(question.text) and coqa (every string of questions)")
      ->required();
  decon->add_option("--report", dc.report,
                    "A JSON summary: documents split, removed, trimmed, ...");
  decon->add_option("--max-ngram-size", dc.filter.max_ngram, "filter_ngrams.py's")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  decon->add_option("--min-ngram-size", dc.filter.min_ngram, "filter_ngrams.py's")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  decon
      ->add_option("--filter-text-char-len", dc.filter.filter_text_char_len,
                   "Pieces of at most this many characters are dropped")
      ->capture_default_str();
  decon
      ->add_option("--key-threshold", dc.filter.key_threshold,
                   "N-grams hit in this many training documents or more are kept (not task leaks)")
      ->capture_default_str();
  decon
      ->add_option("--splits-count", dc.filter.splits_count,
                   "Documents cut into more pieces are dropped")
      ->capture_default_str();
  decon
      ->add_option("--remove-char-each-side", dc.filter.remove_char_each_side,
                   "Characters removed on each side of a hit before looking for a sentence end")
      ->capture_default_str();
  decon->add_option("--batch-mb", dc.batch_mb, "Megabytes of records read at a time")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  add_common(*decon, dc_common);

  // run
  mtnlg::curate::PipelineOptions pl;
  Common pl_common;
  CLI::App* run = app.add_subcommand(
      "run", "The whole pipeline from a corpus YAML: stages, tokens, report, data.blend");
  run->footer(
      "Runs the paper's order from one file: per dataset extract, clean, quality; dedup across "
      "the datasets; per dataset decontaminate, then mtnlg-preprocess's tokens (with "
      "<|endoftext|>). Writes OUTPUT_DIR/tokens/NAME_text_document.{bin,idx}, report.md and "
      "report.json (per dataset the documents after each step, tokens, weight, epochs at "
      "training_tokens) and blend.yaml (the recipe's data.blend). A step whose outputs exist with "
      "the same settings is not run again. docs/curation.md gives the file's keys and a worked "
      "example. Example: mtnlg-curate run --config corpus.yaml");
  run->add_option("--config", pl.config, "The corpus YAML")->required();
  add_run_options(*run, pl_common);

  // extract
  mtnlg::curate::ExtractOptions ex;
  Common ex_common;
  CLI::App* extract =
      app.add_subcommand("extract", "WARC and HTML files to text records, by jusText over libxml2");
  extract->footer(
      "WARC files (.warc, .warc.gz): each response record with an HTTP 200 HTML body goes "
      "through jusText (its charset from the Content-Type header, else a <meta> tag, else UTF-8), "
      "each conversion record (WET) passes through; records carry url, date and "
      "warc_record_id. HTML files (.html, .htm): a document each, url the path. jusText as the "
      "Python package does it, over the same parser (libxml2, which lxml wraps): block tags and "
      "double <br> cut paragraphs, each classified by length, stop-word density and link "
      "density, then by its neighbours; a document is its good paragraphs, one a line, and one "
      "without any is dropped and counted. Example: mtnlg-curate extract --input "
      "CC-MAIN-00000.warc.gz --output cc-00000.jsonl.zst --report cc-00000.extract.json");
  extract->add_option("--input", ex.inputs, "WARC or HTML files (repeatable)")->required();
  extract->add_option("--output", ex.output, "The text records (.jsonl, .gz, .zst)")->required();
  extract->add_option("--report", ex.report, "A JSON summary: records by type, skipped by reason");
  extract->add_option("--stoplist", ex.stoplist,
                      "A stop-word file, one word a line, as jusText's stoplists/*.txt (default: "
                      "jusText's English list, compiled in)");
  extract->add_option("--length-low", ex.justext.length_low, "jusText's")->capture_default_str();
  extract->add_option("--length-high", ex.justext.length_high, "jusText's")->capture_default_str();
  extract->add_option("--stopwords-low", ex.justext.stopwords_low, "jusText's")
      ->capture_default_str();
  extract->add_option("--stopwords-high", ex.justext.stopwords_high, "jusText's")
      ->capture_default_str();
  extract->add_option("--max-link-density", ex.justext.max_link_density, "jusText's")
      ->capture_default_str();
  extract->add_option("--max-heading-distance", ex.justext.max_heading_distance, "jusText's")
      ->capture_default_str();
  extract->add_flag("--no-headings", ex.justext.no_headings,
                    "jusText's: headings get no special treatment");
  add_run_options(*extract, ex_common);

  // clean
  mtnlg::curate::CleanOptions cl;
  Common cl_common;
  std::string cl_languages;
  CLI::App* clean = app.add_subcommand(
      "clean", "NFC and control characters; filters by length, GPT-2 tokens, language (CLD2)");
  clean->footer(
      "Every text is normalized to NFC (ICU) and loses its control characters but tab and "
      "newline. Then the filters asked for, in this order, the first that fires removing the "
      "document (counted per rule in the report): --min-chars N (fewer characters: Megatron's "
      "remove_512 with 512), --short-javascript N (fewer characters and 'javascript' in the text: "
      "remove_256_javascript with 256), --min-gpt2-tokens N (fewer GPT-2 tokens, counted for "
      "texts under 8 N characters as Megatron's cleanup_dataset.py does; 128 there), --languages "
      "(CLD2's most likely language not listed, or its share of the text under "
      "--min-language-score). Example: mtnlg-curate clean --input cc.jsonl --output "
      "cc.clean.jsonl --languages en --min-language-score 0.5 --min-gpt2-tokens 128");
  clean->add_option("--input", cl.input, "The shard")->required();
  clean->add_option("--output", cl.output, "The kept records, texts cleaned")->required();
  clean->add_option("--report", cl.report, "A JSON summary: kept, removed per rule, languages");
  clean->add_option("--min-chars", cl.min_chars, "Remove texts of fewer characters (0: off)")
      ->check(mtnlg::non_negative_number());
  clean
      ->add_option("--short-javascript", cl.short_javascript,
                   "Remove texts of fewer characters that mention javascript (0: off)")
      ->check(mtnlg::non_negative_number());
  clean
      ->add_option("--min-gpt2-tokens", cl.min_gpt2_tokens,
                   "Remove texts of fewer GPT-2 tokens (0: off)")
      ->check(mtnlg::non_negative_number());
  clean->add_option("--languages", cl_languages,
                    "Comma-separated CLD2 language codes to keep (en, de, fr, zh, ...; empty: no "
                    "language filter)");
  clean
      ->add_option("--min-language-score", cl.min_language_score,
                   "With --languages: the least share of the text in its language (0 to 1)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  // The Gopher rules: each off unless given; --gopher gives the rest Gopher's thresholds.
  bool cl_gopher = false;
  std::vector<std::string> cl_top, cl_dup;
  auto& g = cl.gopher;
  clean->add_flag("--gopher", cl_gopher,
                  "Every Gopher rule not given below at Gopher's threshold (50-100000 words, mean "
                  "word length 3-10, symbol ratio 0.1, bullet lines 0.9, ellipsis lines 0.3, "
                  "alpha words 0.8, 2 stop words, duplicate paragraphs 0.3 and 0.2 of characters, "
                  "lines 0.3 and 0.2, top 2/3/4-grams 0.2/0.18/0.16, duplicate 5-10-grams "
                  "0.15-0.10)");
  clean->add_option("--min-words", g.min_words,
                    "gopher_short_doc: fewer words (not counting punctuation alone)");
  clean->add_option("--max-words", g.max_words, "gopher_long_doc: more words");
  clean->add_option("--min-mean-word-length", g.min_mean_word_length,
                    "gopher_below_avg_threshold: a lower mean word length");
  clean->add_option("--max-mean-word-length", g.max_mean_word_length,
                    "gopher_above_avg_threshold: a higher mean word length");
  clean->add_option("--max-symbol-word-ratio", g.max_symbol_word_ratio,
                    "gopher_too_many_hashes / _ellipsis: more '#', or '...' and '…', per word");
  clean->add_option("--max-bullet-lines-ratio", g.max_bullet_lines_ratio,
                    "gopher_too_many_bullets: a larger share of lines starting with '•' or '-'");
  clean->add_option("--max-ellipsis-lines-ratio", g.max_ellipsis_lines_ratio,
                    "gopher_too_many_end_ellipsis: a larger share of lines ending in an ellipsis");
  clean->add_option("--min-alpha-words-ratio", g.min_alpha_words_ratio,
                    "gopher_below_alpha_threshold: a smaller share of words holding a letter");
  clean->add_option("--min-stop-words", g.min_stop_words,
                    "gopher_enough_stop_words: fewer distinct ones of the, be, to, of, and, that, "
                    "have, with");
  clean->add_option("--max-dup-para-frac", g.max_dup_para_frac,
                    "dup_para_frac: a larger share of repeated paragraphs (split at blank lines)");
  clean->add_option("--max-dup-para-char-frac", g.max_dup_para_char_frac,
                    "dup_para_char_frac: a larger share of characters in repeated paragraphs");
  clean->add_option("--max-dup-line-frac", g.max_dup_line_frac,
                    "dup_line_frac: a larger share of repeated lines");
  clean->add_option("--max-dup-line-char-frac", g.max_dup_line_char_frac,
                    "dup_line_char_frac: a larger share of characters in repeated lines");
  clean->add_option("--max-top-ngram-char-frac", cl_top,
                    "N=F, repeatable: top_N_gram: the most frequent N-gram's characters over F of "
                    "the text");
  clean->add_option("--max-dup-ngram-char-frac", cl_dup,
                    "N=F, repeatable: duplicated_N_n_grams: repeated N-grams' characters over F of "
                    "the text");
  // The C4 rules: each off unless given; --c4 gives the rest DataTrove's C4QualityFilter values.
  bool cl_c4 = false;
  auto& c4 = cl.c4;
  clean->add_flag("--c4", cl_c4,
                  "Every C4 rule not given below at DataTrove's C4QualityFilter value (words up to "
                  "1000 characters, citations cut, terminal punctuation, 3 words a line, lorem "
                  "ipsum, javascript, curly brackets, policy lines, 5 sentences)");
  clean
      ->add_option("--c4-max-word-length", c4.max_word_length,
                   "c4_too_long_word: drop lines holding a longer word (code points)")
      ->check(mtnlg::non_negative_number());
  clean->add_flag("--c4-remove-citations", c4.remove_citations,
                  "Cut [123], [edit] and [citation needed] from lines");
  clean->add_flag("--c4-terminal-punct", c4.terminal_punct,
                  "c4_no_terminal_punct: drop lines not ending in . ? ! \" ' or ending in ...");
  clean
      ->add_option("--c4-min-words-per-line", c4.min_words_per_line,
                   "c4_too_few_words: drop lines of fewer whitespace words")
      ->check(mtnlg::non_negative_number());
  clean->add_flag("--c4-lorem-ipsum", c4.lorem_ipsum,
                  "c4_lorem_ipsum: remove documents with a kept line holding \"lorem ipsum\"");
  clean->add_flag("--c4-javascript", c4.javascript,
                  "c4_javascript: drop lines holding \"javascript\" (any case)");
  clean->add_flag("--c4-curly-bracket", c4.curly_bracket,
                  "c4_curly_bracket: remove documents with a kept line holding {");
  clean->add_flag("--c4-policy", c4.policy,
                  "c4_policy: drop lines holding terms of use, privacy policy, cookie policy, "
                  "uses cookies, use of cookies or use cookies");
  clean
      ->add_option("--c4-min-sentences", c4.min_sentences,
                   "c4_too_few_sentences: remove documents whose kept lines hold fewer sentences "
                   "(Punkt's with --punkt-dir, as DataTrove counts; else a sentence ends at . ! ? "
                   "before whitespace and a capital, digit or opening quote)")
      ->check(mtnlg::non_negative_number());
  clean->add_option("--punkt-dir", cl.punkt_dir,
                    "NLTK's Punkt model of the language, as `python3 -m nltk.downloader punkt_tab` "
                    "installs it (nltk_data/tokenizers/punkt_tab/english): the Gopher rules' words "
                    "become NLTK's word_tokenize and the C4 rules' sentences Punkt's, as DataTrove "
                    "counts them (default: whitespace words and the rule above)");
  clean->add_option("--vocab-file", cl.vocab_file,
                    "GPT-2 encoder.json for --min-gpt2-tokens (default data/gpt2/encoder.json)");
  clean->add_option("--merge-file", cl.merge_file,
                    "GPT-2 vocab.bpe for --min-gpt2-tokens (default data/gpt2/vocab.bpe)");
  add_common(*clean, cl_common);

  // quality train | score | filter
  CLI::App* quality = app.add_subcommand(
      "quality", "The quality classifier (fastText): train, score, filter by threshold or Pareto");
  quality->footer(
      "GPT-3's and the Pile's quality filter, as MT-NLG filtered its Common Crawl snapshots: a "
      "fastText classifier (word bigrams) trained on high-quality documents against raw crawl, "
      "each document scored with its probability of being high quality, and kept by a threshold "
      "or by GPT-3's Pareto rule. fastText sees a document as the Pile's classifier did: newlines "
      "replaced by spaces, then its first 4000 characters, then the last 1500 of those. Example: "
      "mtnlg-curate quality train --positive wiki.jsonl --positive books.jsonl --negative "
      "cc.jsonl --output quality.bin; mtnlg-curate quality score --model quality.bin --input "
      "cc.jsonl --output cc.scored.jsonl; mtnlg-curate quality filter --input cc.scored.jsonl "
      "--output cc.kept.jsonl --pareto-alpha 9 --seed 1");
  quality->require_subcommand(1);
  mtnlg::curate::QualityTrainOptions qt;
  Common qt_common;
  CLI::App* q_train = quality->add_subcommand(
      "train", "Fit the classifier: --positive (high quality) against --negative shards");
  q_train->footer(
      "Lines \"__label__hq TEXT\" and \"__label__lq TEXT\", shuffled by numpy RandomState(seed), "
      "train a supervised fastText model (softmax loss, word n-grams) on one thread: fastText's "
      "threads race on the weights, and one thread makes a model a rerun reproduces. The model "
      "is written as OUTPUT.tmp and renamed.");
  q_train->add_option("--positive", qt.positive, "High-quality shards (repeatable)")->required();
  q_train->add_option("--negative", qt.negative, "Raw-crawl shards (repeatable)")->required();
  q_train->add_option("--output", qt.output, "The model file (fastText's .bin)")->required();
  q_train->add_option("--epoch", qt.epoch, "fastText's -epoch")->capture_default_str();
  q_train->add_option("--dim", qt.dim, "fastText's -dim")->capture_default_str();
  q_train->add_option("--lr", qt.lr, "fastText's -lr")->capture_default_str();
  q_train->add_option("--word-ngrams", qt.word_ngrams, "fastText's -wordNgrams (2: bigrams)")
      ->capture_default_str();
  q_train->add_option("--min-count", qt.min_count, "fastText's -minCount")->capture_default_str();
  q_train
      ->add_option("--bucket", qt.bucket,
                   "fastText's -bucket: hashed n-gram rows (the model holds bucket x dim floats)")
      ->capture_default_str();
  q_train->add_option("--seed", qt.seed, "Seed of the shuffle and of fastText")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  add_common(*q_train, qt_common);

  mtnlg::curate::QualityScoreOptions qs;
  Common qs_common;
  CLI::App* q_score = quality->add_subcommand(
      "score", "Add each document's high-quality probability as a number (--score-key)");
  q_score->footer(
      "The probability is fastText's for __label__hq on the document's line, what `fasttext "
      "predict-prob MODEL - 2` prints for it (to the 6 digits it prints).");
  q_score->add_option("--model", qs.model, "The model (quality train's --output)")->required();
  q_score->add_option("--input", qs.input, "The shard to score")->required();
  q_score->add_option("--output", qs.output, "The scored shard")->required();
  q_score->add_option("--score-key", qs.score_key, "The member the probability goes in")
      ->capture_default_str();
  add_common(*q_score, qs_common);

  mtnlg::curate::QualityFilterOptions qf;
  Common qf_common;
  CLI::App* q_filter = quality->add_subcommand(
      "filter", "Keep documents by score: --threshold T, or GPT-3's --pareto-alpha A --seed S");
  q_filter->footer(
      "--threshold T keeps a document whose score is at least T. --pareto-alpha A keeps it when "
      "a Lomax(A) draw exceeds 1 - score (GPT-3's rule: numpy RandomState(seed).pareto(A), one "
      "draw per document in order; A = 9 in GPT-3, 3 in the Pile): reruns keep the same "
      "documents. Kept records are written unchanged.");
  q_filter->add_option("--input", qf.input, "A scored shard (quality score's --output)")
      ->required();
  q_filter->add_option("--output", qf.output, "The kept records")->required();
  auto* thr = q_filter->add_option("--threshold", qf.threshold, "Keep scores >= T");
  auto* alpha = q_filter
                    ->add_option("--pareto-alpha", qf.pareto_alpha,
                                 "GPT-3's Pareto shape (keep when pareto(A) > 1 - score)")
                    ->check(mtnlg::positive_number());
  thr->excludes(alpha);
  q_filter->add_option("--seed", qf.seed, "Seed of the Pareto draws")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  q_filter->add_option("--score-key", qf.score_key, "The member holding the score")
      ->capture_default_str();
  q_filter->add_option("--report", qf.report, "A JSON summary: documents, kept, removed");
  add_common(*q_filter, qf_common);

  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  const auto quality_common = [&](const Common& c) {
    mtnlg::init_logging(c.log_level);
    mtnlg::curate::QualityCommon q;
    q.text_key = c.text_key;
    q.bad_records = mtnlg::curate::parse_bad_records(c.bad_records, "--bad-records");
    q.threads = c.threads;
    q.progress = progress_mode(c);
    return q;
  };
  return mtnlg::exit_status_of([&] {
    if (run->parsed()) {
      mtnlg::init_logging(pl_common.log_level);
      pl.threads = pl_common.threads;
      pl.progress = progress_mode(pl_common);
      const std::string report = mtnlg::curate::run_pipeline(pl);
      spdlog::info("run: done; the report is {}", report);
      return 0;
    }
    if (extract->parsed()) {
      mtnlg::init_logging(ex_common.log_level);
      ex.threads = ex_common.threads;
      ex.progress = progress_mode(ex_common);
      const auto s = mtnlg::curate::run_extract(ex);
      std::string skipped;
      for (const auto& [why, n] : s.skipped) skipped += "; " + why + " " + std::to_string(n);
      spdlog::info("extract: {} documents ({:.1f} MB of text from {:.1f} MB) -> {} in {:.2f} s{}",
                   s.documents, s.text_bytes / 1e6, s.input_bytes / 1e6, ex.output, s.seconds,
                   skipped);
      return 0;
    }
    if (clean->parsed()) {
      mtnlg::init_logging(cl_common.log_level);
      cl.languages = split_commas(cl_languages);
      const auto pairs = [](const std::vector<std::string>& specs, const char* flag) {
        std::vector<std::pair<int, double>> out;
        for (const std::string& s : specs) {
          const size_t eq = s.find('=');
          try {
            if (eq == std::string::npos) throw std::invalid_argument(s);
            out.emplace_back(std::stoi(s.substr(0, eq)), std::stod(s.substr(eq + 1)));
          } catch (const std::exception&) {
            throw mtnlg::invalid_argument(
                std::string(flag) + " " + s + ": expected N=F, e.g. 2=0.2", flag);
          }
        }
        return out;
      };
      cl.gopher.max_top_ngram_char_frac = pairs(cl_top, "--max-top-ngram-char-frac");
      cl.gopher.max_dup_ngram_char_frac = pairs(cl_dup, "--max-dup-ngram-char-frac");
      if (cl_gopher) mtnlg::curate::apply_gopher_defaults(&cl.gopher);
      if (cl_c4) mtnlg::curate::apply_c4_defaults(&cl.c4);
      if (cl.min_gpt2_tokens > 0) {
        cl.vocab_file =
            mtnlg::vocabulary_path(cl.vocab_file, "--vocab-file", "data/gpt2/encoder.json");
        cl.merge_file =
            mtnlg::vocabulary_path(cl.merge_file, "--merge-file", "data/gpt2/vocab.bpe");
      }
      cl.text_key = cl_common.text_key;
      cl.bad_records = mtnlg::curate::parse_bad_records(cl_common.bad_records, "--bad-records");
      cl.threads = cl_common.threads;
      cl.progress = progress_mode(cl_common);
      const auto s = mtnlg::curate::run_clean(cl);
      std::string removed;
      for (const auto& [rule, n] : s.removed) removed += " " + rule + " " + std::to_string(n);
      spdlog::info("clean: kept {} of {} documents ({} normalized); removed:{} -> {}", s.kept,
                   s.documents, s.normalized, removed.empty() ? " none" : removed, cl.output);
      return 0;
    }
    if (q_train->parsed()) {
      qt.common = quality_common(qt_common);
      const auto s = mtnlg::curate::run_quality_train(qt);
      spdlog::info("quality train: {} positive and {} negative documents -> {} in {:.2f} s",
                   s.positive, s.negative, qt.output, s.seconds);
      return 0;
    }
    if (q_score->parsed()) {
      qs.common = quality_common(qs_common);
      const auto s = mtnlg::curate::run_quality_score(qs);
      spdlog::info("quality score: {} documents, mean {:.4f} -> {} in {:.2f} s", s.documents,
                   s.mean_score, qs.output, s.seconds);
      return 0;
    }
    if (q_filter->parsed()) {
      qf.common = quality_common(qf_common);
      if (q_filter->count("--threshold") + q_filter->count("--pareto-alpha") != 1)
        throw mtnlg::invalid_argument(
            "quality filter needs --threshold T or --pareto-alpha A (one of them)", "--threshold");
      qf.use_threshold = q_filter->count("--threshold") == 1;
      const auto s = mtnlg::curate::run_quality_filter(qf);
      spdlog::info("quality filter: kept {} of {} documents (mean score {:.4f}) -> {}", s.kept,
                   s.documents, s.mean_score, qf.output);
      return 0;
    }
    if (decon->parsed()) {
      mtnlg::init_logging(dc_common.log_level);
      for (const std::string& spec : dc_tasks) {
        const size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
          throw mtnlg::invalid_argument(
              "--task-file " + spec + ": expected TASK=FILE, e.g. lambada=lambada_test.jsonl",
              "--task-file");
        dc.task_files.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
      }
      if (dc.filter.min_ngram > dc.filter.max_ngram)
        throw mtnlg::invalid_argument("--min-ngram-size must not exceed --max-ngram-size",
                                      "--min-ngram-size");
      dc.text_key = dc_common.text_key;
      dc.bad_records = mtnlg::curate::parse_bad_records(dc_common.bad_records, "--bad-records");
      dc.threads = dc_common.threads;
      dc.progress = progress_mode(dc_common);
      const auto s = mtnlg::curate::run_decontaminate(dc);
      spdlog::info(
          "decontaminate: {} documents -> {} pieces in {}: {} split, {} removed whole, {} over "
          "--splits-count, {} trimmed; {:.2f} s",
          s.documents, s.pieces, dc.output, s.split, s.removed, s.too_many_splits, s.trimmed,
          s.seconds);
      return 0;
    }
    if (dedup->parsed() && !minhash->parsed()) {
      mtnlg::init_logging(dd_common.log_level);
      if (dd_step == "all") {
        dd.step = mtnlg::curate::DedupStep::kAll;
      } else if (dd_step == "signatures") {
        dd.step = mtnlg::curate::DedupStep::kSignatures;
      } else if (dd_step == "components") {
        dd.step = mtnlg::curate::DedupStep::kComponents;
      } else if (dd_step == "output") {
        dd.step = mtnlg::curate::DedupStep::kOutput;
      } else {
        throw mtnlg::invalid_argument(
            "--step " + dd_step + ": the fix: all, signatures, components or output", "--step");
      }
      if (dd.task_index < 0 || dd.task_index >= dd.task_count)
        throw mtnlg::invalid_argument("--task-index " + std::to_string(dd.task_index) +
                                          " is not below --task-count " +
                                          std::to_string(dd.task_count),
                                      "--task-index");
      for (const char* flag : {"--input", "--priority", "--output-dir", "--report"})
        if (dedup->count(flag) == 0)
          throw mtnlg::invalid_argument(std::string("dedup needs ") + flag + " (see --help)", flag);
      for (const std::string& spec : dd_inputs)
        dd.inputs.push_back(mtnlg::curate::parse_dedup_input(spec));
      dd.priority = split_commas(dd_priority);
      if ((dedup->count("--bands") == 0) != (dedup->count("--rows") == 0))
        throw mtnlg::invalid_argument("--bands and --rows go together", "--bands");
      dd.family = mtnlg::curate::parse_hash_family(dd_hash, "--hash");
      dd.text_key = dd_common.text_key;
      dd.bad_records = mtnlg::curate::parse_bad_records(dd_common.bad_records, "--bad-records");
      dd.threads = dd_common.threads;
      dd.progress = progress_mode(dd_common);
      const auto s = mtnlg::curate::run_dedup(dd);
      if (dd.step != mtnlg::curate::DedupStep::kAll &&
          dd.step != mtnlg::curate::DedupStep::kComponents) {
        spdlog::info("dedup: --step {} done (task {} of {})", dd_step, dd.task_index,
                     dd.task_count);
        return 0;
      }
      for (const auto& [name, c] : s.datasets)
        spdlog::info("dedup: {}: {} documents, {} kept, {} exact and {} fuzzy duplicates removed",
                     name, c.documents, c.kept, c.exact_removed, c.fuzzy_removed);
      spdlog::info(
          "dedup: {} documents, {} groups; {} candidate pairs, {} verified, {} edges; "
          "{:.2f} s; report {}, summary {}/dedup_summary.json",
          s.documents, s.groups, s.candidate_pairs, s.verified_pairs, s.edges, s.seconds, dd.report,
          dd.output_dir);
      return 0;
    }
    if (minhash->parsed()) {
      mtnlg::init_logging(mh_common.log_level);
      mh.family = mtnlg::curate::parse_hash_family(mh_hash, "--hash");
      mh.text_key = mh_common.text_key;
      mh.bad_records = mtnlg::curate::parse_bad_records(mh_common.bad_records, "--bad-records");
      mh.threads = mh_common.threads;
      mh.progress = progress_mode(mh_common);
      const auto s = mtnlg::curate::run_minhash(mh);
      log_skipped(s.skipped, mh.input);
      spdlog::info(
          "wrote {}: {} documents x {} uint32 ({} hash, seed {}), {:.1f} MB of text in {:.2f} s "
          "({:.2f} MB/s of text)",
          mh.output, s.documents, mh.num_perm, mtnlg::curate::hash_family_name(mh.family), mh.seed,
          s.text_bytes / 1e6, s.seconds, s.seconds > 0 ? s.text_bytes / 1e6 / s.seconds : 0.0);
      return 0;
    }
    return 2;
  });
}
