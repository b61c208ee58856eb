// `mtnlg-curate quality`: the quality classifier of GPT-3 and the Pile, as MT-NLG filtered its
// Common Crawl snapshots: a fastText classifier (Debian's libfasttext) trained on high-quality
// documents (positives) against raw crawl (negatives), each document's probability of being
// high quality, and a filter by threshold or by GPT-3's Pareto rule.
//
// A document reaches fastText as the Pile's classifier saw it: its newlines replaced by spaces,
// then its first 4000 characters (code points), then the last 1500 of those
// (text.replace('\n', ' ')[:4000][-1500:]); fastText splits that line into words at whitespace.
//
//   train   writes "__label__hq TEXT" / "__label__lq TEXT" lines (shuffled by numpy
//           RandomState(seed)'s shuffle), trains a supervised model with word bigrams (softmax
//           loss) on one thread (fastText's threads race: one thread makes a model a rerun
//           reproduces), and saves it, written as MODEL.tmp and renamed.
//   score   adds the probability of __label__hq as a number (--score-key): what `fasttext
//           predict-prob MODEL - 2` prints for the same line.
//   filter  keeps a document when its score >= --threshold, or, GPT-3's rule, when a Lomax(alpha)
//           draw (numpy RandomState(seed).pareto(alpha), one per document in order) exceeds
//           1 - score: alpha 9 in GPT-3, 3 in the Pile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

// The line fastText sees for a document's text.
std::string quality_line(const std::string& text);

struct QualityCommon {
  std::string text_key = "text";
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
};

struct QualityTrainOptions {
  std::vector<std::string> positive, negative;  // shards
  std::string output;
  int epoch = 5, dim = 100, word_ngrams = 2, min_count = 1, bucket = 2000000;
  double lr = 0.1;
  uint32_t seed = 1;
  QualityCommon common;
};

struct QualityTrainStats {
  int64_t positive = 0, negative = 0;
  double seconds = 0;
};

QualityTrainStats run_quality_train(const QualityTrainOptions& o);

struct QualityScoreOptions {
  std::string model, input, output, score_key = "quality_score";
  QualityCommon common;
};

struct QualityFilterOptions {
  std::string input, output, report, score_key = "quality_score";
  bool use_threshold = false;
  double threshold = 0.0;
  double pareto_alpha = 0.0;
  uint32_t seed = 1;
  QualityCommon common;
};

struct QualityStats {
  int64_t documents = 0, kept = 0, skipped = 0;
  double mean_score = 0, seconds = 0;
};

QualityStats run_quality_score(const QualityScoreOptions& o);
QualityStats run_quality_filter(const QualityFilterOptions& o);

}  // namespace mtnlg::curate
