// `mtnlg-curate decontaminate`: removes downstream-task text from a training shard as Megatron-LM's
// tools/openwebtext/filter_ngrams.py does (data/curate/ngram_filter.h): the task files' n-grams,
// pass 1 counting in how many of the shard's documents each is hit, pass 2 cutting the documents
// at the hits of the n-grams hit in fewer than --key-threshold documents. Each kept piece is
// written as its record with the text replaced and a "split_id" member added (or extended, as the
// script does: OLD-TASKS-NNNNNNNNNN-PPPP, the tasks joined by '-', the record's line number, the
// piece's index); every other member is carried through unchanged.
//
// Task files are JSON Lines with lm-evaluation-harness's field names (task_text_fields()); a
// task's texts are every such field of every record.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/curate/ngram_filter.h"
#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

// The fields whose text a task contributes (filter_ngrams.py's for its tasks, over the records
// of the Hugging Face datasets it loads; the paper's evaluation tasks by lm-evaluation-harness's
// names): "name" a string member, "name.sub" a string member of an object member
// (natural_questions' question.text), "name[]" every string of an array member (coqa's
// questions). Throws invalid_argument naming the known tasks for another.
std::vector<std::string> task_text_fields(const std::string& task);

// The texts of one field spec in one JSON record (the last of a repeated member, as Python's
// json module takes it); none where the member is missing or of another type (the script skips
// those). Throws corruption (message without context) when `line` is not one JSON object.
std::vector<std::string> task_texts(std::string_view line, const std::string& spec);

struct DecontaminateOptions {
  std::string input, output, report;
  std::vector<std::pair<std::string, std::string>> task_files;  // (task, file), in order
  NgramFilterOptions filter;
  std::string text_key = "text";
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;
  int64_t batch_mb = 16;
  ProgressMode progress = ProgressMode::kAuto;
};

struct DecontaminateStats {
  int64_t task_ngrams = 0, ngrams_below_threshold = 0;
  int64_t documents = 0, pieces = 0, split = 0, removed = 0, too_many_splits = 0, trimmed = 0;
  int64_t skipped = 0;
  double seconds = 0;
};

DecontaminateStats run_decontaminate(const DecontaminateOptions& o);

}  // namespace mtnlg::curate
