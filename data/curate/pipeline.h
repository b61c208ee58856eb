// `mtnlg-curate run --config corpus.yaml`: the whole corpus pipeline of the paper from one file.
//
//   output_dir: corpus            # everything goes under it, a folder per step
//   text_key: text
//   training_tokens: 270e9        # for the report's epochs (optional)
//   datasets:                     # in order; each: name, inputs (paths or globs), the per-dataset
//     - name: wiki                #   steps among extract, clean, quality (in that order), and
//       inputs: [raw/wiki/*.jsonl]#   its blend weight
//       steps: [clean]
//       weight: 0.3
//     - name: cc
//       inputs: [raw/cc/*.warc.gz]
//       steps: [extract, clean, quality]
//       weight: 0.7
//   clean: {min_gpt2_tokens: 128, short_javascript: 256, min_chars: 0, languages: [en],
//           min_language_score: 0.5}
//   quality: {model: quality.bin}  or  {train: {positive: [wiki], negative: [cc], dim: 100, ...}}
//            with threshold: T or pareto_alpha: A, seed: S
//   dedup: {priority: [wiki, cc], threshold: 0.8, num_perm: 128, seed: 1, hash: xxh3}
//   decontaminate: {task_files: {lambada: tasks/lambada.jsonl, piqa: tasks/piqa.jsonl}}
//   tokenizer: {vocab_file: data/gpt2/encoder.json, merge_file: data/gpt2/vocab.bpe}
//
// Steps run in the paper's order: per dataset extract, clean, quality; then dedup across all
// datasets; then decontamination and tokenization (mtnlg-preprocess's, with <|endoftext|>)
// per dataset. Every step's outputs appear whole (staged and renamed), and a step whose outputs
// exist with a stamp of the same settings is not run again: a run killed part way and started
// again redoes only what was unfinished and ends with the same bytes.
//
// Results: OUTPUT_DIR/tokens/NAME_text_document.{bin,idx}; OUTPUT_DIR/report.json and
// report.md (the paper's Figure 2 kind: per dataset the documents after each step, tokens,
// weight and epochs at training_tokens); OUTPUT_DIR/blend.yaml, the recipe's data.blend.
// Unknown keys, missing sections a step needs, and datasets a priority or quality spec does not
// name are errors naming the key.
#pragma once

#include <string>

#include "data/preprocess_progress.h"

namespace mtnlg::curate {

struct PipelineOptions {
  std::string config;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
};

// Runs the pipeline; returns the path of report.md.
std::string run_pipeline(const PipelineOptions& o);

}  // namespace mtnlg::curate
