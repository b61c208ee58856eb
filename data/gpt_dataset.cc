#include "data/gpt_dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/status.h"

namespace mtnlg {

namespace {

// Python 3's round(): nearest integer, ties to even.
int64_t round_half_even(double x) {
  if (std::fabs(x - std::trunc(x)) == 0.5) return static_cast<int64_t>(2.0 * std::round(x / 2.0));
  return static_cast<int64_t>(std::round(x));
}

std::string split_str(const std::vector<double>& split) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < split.size(); ++i) os << (i ? ", " : "") << split[i];
  os << "]";
  return os.str();
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValid:
      return "valid";
    case Split::kTest:
      return "test";
  }
  return "?";
}

std::array<int64_t, 4> split_boundaries(int64_t num_documents, const std::vector<double>& split) {
  MTNLG_CHECK_GE(num_documents, 0);
  if (split.size() != 3) {
    throw invalid_argument("data.split must have 3 entries (train, valid, test), got " +
                               std::to_string(split.size()) + ": " + split_str(split) +
                               "; the fix: e.g. data.split: [969, 30, 1]",
                           "data.split");
  }
  double sum = 0.0;
  for (double s : split) {
    if (!std::isfinite(s) || s < 0.0) {
      throw invalid_argument("data.split entries must be finite and non-negative, got " +
                                 split_str(split) + "; the fix: e.g. data.split: [969, 30, 1]",
                             "data.split");
    }
    sum += s;
  }
  if (!(sum > 0.0)) {
    throw invalid_argument("data.split must not be all zeros; the fix: e.g. data.split: [1, 0, 0]",
                           "data.split");
  }
  // Megatron's split matrix: book-ends at the running sums of the normalized weights (w / sum(w)
  // in float64, summed in order), each scaled by the document count and rounded half to even
  // (Python's round): blended_megatron_dataset_builder.py _build_megatron_dataset_splits.
  std::array<int64_t, 4> b{0, 0, 0, 0};
  double bookend = 0.0;
  for (size_t k = 0; k < 3; ++k) {
    bookend += split[k] / sum;
    b[k + 1] = round_half_even(bookend * static_cast<double>(num_documents));
  }
  return b;
}

DocumentRange split_range(const IndexedDataset& dataset, const std::vector<double>& split,
                          Split which) {
  const auto b = split_boundaries(dataset.num_sequences(), split);
  const size_t k = static_cast<size_t>(which);
  DocumentRange range{std::max<int64_t>(b[k], 0), std::max<int64_t>(b[k + 1], 0)};
  if (which == Split::kTrain && range.empty()) {
    throw invalid_argument("data.split " + split_str(split) + " leaves the train split no " +
                               "documents of the " + std::to_string(dataset.num_sequences()) +
                               " in " + dataset.prefix() +
                               "; the fix: raise data.split's first (train) entry, or use a "
                               "dataset with more documents",
                           "data.split");
  }
  return range;
}

SequentialGPTDataset::SequentialGPTDataset(std::shared_ptr<const IndexedDataset> dataset,
                                           int64_t seq_length, DocumentRange documents)
    : dataset_(std::move(dataset)), seq_length_(seq_length), documents_(documents) {
  MTNLG_CHECK(dataset_ != nullptr);
  if (seq_length_ < 1) {
    throw invalid_argument("sequence length must be at least 1, got " +
                               std::to_string(seq_length_) + "; the fix: set model.seq_length",
                           "model.seq_length");
  }
  MTNLG_CHECK_GE(documents_.begin, 0);
  MTNLG_CHECK_LE(documents_.end, dataset_->num_sequences());
  if (documents_.empty()) {
    throw invalid_argument("the train split of " + dataset_->prefix() +
                               " has no documents; the fix: raise data.split's first entry",
                           "data.split");
  }
  first_sequence_ = documents_.begin;
  const int64_t last = documents_.end;
  prefix_.reserve(static_cast<size_t>(last - first_sequence_ + 1));
  prefix_.push_back(0);
  for (int64_t s = first_sequence_; s < last; ++s) {
    prefix_.push_back(prefix_.back() + dataset_->sequence_length(s));
  }
  if (tokens_per_epoch() == 0) {
    throw invalid_argument("documents [" + std::to_string(documents_.begin) + ", " +
                               std::to_string(documents_.end) + ") of " + dataset_->prefix() +
                               " hold no tokens; the fix: check data.split and the dataset",
                           "data.split");
  }
  // (i mod T) * S must fit in int64 (see sample()).
  MTNLG_CHECK_LE(tokens_per_epoch(), std::numeric_limits<int64_t>::max() / seq_length_);
}

void SequentialGPTDataset::sample(int64_t i, int32_t* out) const {
  MTNLG_CHECK_GE(i, 0);
  const int64_t total = tokens_per_epoch();
  int64_t pos = ((i % total) * seq_length_) % total;
  // The range's sequence holding `pos`: the last k with prefix_[k] <= pos (skips empty ones).
  const int64_t num_seq = static_cast<int64_t>(prefix_.size()) - 1;
  int64_t k = std::upper_bound(prefix_.begin(), prefix_.end(), pos) - prefix_.begin() - 1;
  int64_t offset = pos - prefix_[static_cast<size_t>(k)];
  int64_t remaining = seq_length_ + 1;
  while (remaining > 0) {
    const int64_t len = prefix_[static_cast<size_t>(k) + 1] - prefix_[static_cast<size_t>(k)];
    const int64_t n = std::min(len - offset, remaining);
    if (n > 0) {
      dataset_->read(first_sequence_ + k, offset, n, out);
      out += n;
      remaining -= n;
    }
    offset = 0;
    k = (k + 1) % num_seq;  // wraps at the end of the epoch
  }
}

std::string SequentialGPTDataset::description() const {
  return "{\"class\": \"SequentialGPTDataset\", \"prefix\": \"" + dataset_->prefix() +
         "\", \"documents\": [" + std::to_string(documents_.begin) + ", " +
         std::to_string(documents_.end) + "], \"seq_length\": " + std::to_string(seq_length_) + "}";
}

void check_vocab_range(const IndexedDataset& dataset, DocumentRange documents, int64_t vocab_size) {
  MTNLG_CHECK_GT(vocab_size, 0);
  // uint16 ids cannot reach a vocabulary of 65536 or more: nothing to scan.
  if (dataset.token_type() == TokenType::kUInt16 && vocab_size > 65535) return;
  std::vector<int32_t> buf;
  for (int64_t s = documents.begin; s < documents.end; ++s) {
    const int64_t len = dataset.sequence_length(s);
    buf.resize(static_cast<size_t>(len));
    dataset.read(s, 0, len, buf.data());
    for (int64_t t = 0; t < len; ++t) {
      const int32_t id = buf[static_cast<size_t>(t)];
      if (id >= 0 && id < vocab_size) continue;
      throw invalid_argument(
          "token id " + std::to_string(id) + " (sequence " + std::to_string(s) + ", position " +
              std::to_string(t) + ") is outside the vocabulary [0, " + std::to_string(vocab_size) +
              "); the fix: set model.vocab_size to the tokenizer's vocabulary size (GPT-2 BPE: "
              "50257), or re-tokenize the data with the model's tokenizer",
          dataset.bin_path());
    }
  }
}

void SequentialGPTDataset::check_vocab(int64_t vocab_size) const {
  check_vocab_range(*dataset_, documents_, vocab_size);
}

}  // namespace mtnlg
