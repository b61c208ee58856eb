#include "data/shuffled_gpt_dataset.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/host_memory.h"
#include "core/status.h"
#include "data/index_cache.h"

namespace mtnlg {

namespace {

// What the indices depend on in the dataset: its sequence lengths and document boundaries.
// The path is left out so that a copied corpus keeps its cache.
uint64_t content_hash(const IndexedDataset& dataset) {
  return hash64(dataset.raw_document_indices(), hash64(dataset.raw_sequence_lengths()));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GPTDataset::GPTDataset(std::shared_ptr<const IndexedDataset> dataset, DocumentRange documents,
                       const GPTDatasetConfig& config)
    : dataset_(std::move(dataset)), documents_(documents), config_(config) {
  MTNLG_CHECK(dataset_ != nullptr);
  if (config_.seq_length < 1) {
    throw invalid_argument("sequence length must be at least 1, got " +
                               std::to_string(config_.seq_length) +
                               "; the fix: set model.seq_length",
                           "model.seq_length");
  }
  MTNLG_CHECK_GE(config_.num_samples, 0);
  MTNLG_CHECK_GE(documents_.begin, 0);
  MTNLG_CHECK_LE(documents_.end, dataset_->num_sequences());
  const std::string where = "documents [" + std::to_string(documents_.begin) + ", " +
                            std::to_string(documents_.end) + ") of " + dataset_->prefix();
  if (documents_.empty()) {
    throw invalid_argument(where + " is an empty split; the fix: raise its data.split entry",
                           "data.split");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const RangeTokens range = count_range_tokens(*dataset_, documents_);
  tokens_per_epoch_ = range.tokens;
  longest_document_ = range.longest_document;
  if (tokens_per_epoch_ == 0) {
    throw invalid_argument(where + " hold no tokens; the fix: check data.split and the dataset",
                           "data.split");
  }
  num_epochs_ = num_epochs_for(tokens_per_epoch_, config_.num_samples, config_.seq_length);
  num_samples_total_ = num_samples_of(num_epochs_, tokens_per_epoch_, config_.seq_length);
  separate_final_epoch_ = mtnlg::separate_final_epoch(num_epochs_, tokens_per_epoch_,
                                                      config_.num_samples, config_.seq_length);

  description_ = JsonText()
                     .add("class", "GPTDataset")
                     .add("format_version", kFormatVersion)
                     .add("index_content_hash", hex64(content_hash(*dataset_)))
                     .add("num_sequences", dataset_->num_sequences())
                     .add("num_tokens", dataset_->num_tokens())
                     .add("documents_begin", documents_.begin)
                     .add("documents_end", documents_.end)
                     .add("seq_length", config_.seq_length)
                     .add("num_samples", config_.num_samples)
                     .add("seed", config_.seed)
                     .add("shuffle", config_.shuffle)
                     .str();
  {
    // All three indices at once, before the first is filled: a run too long for the machine
    // fails in milliseconds instead of after minutes of building (widths as gpt_indices.cc).
    const auto kInt32Max = static_cast<double>(std::numeric_limits<int32_t>::max());
    const double docs = static_cast<double>(num_epochs_) * static_cast<double>(documents_.size());
    const auto samples = static_cast<double>(num_samples_total_);
    const double wide_samples =
        docs > kInt32Max || static_cast<double>(longest_document_) > kInt32Max ? 8 : 4;
    const double total = docs * (static_cast<double>(documents_.end - 1) > kInt32Max ? 8 : 4) +
                         2 * (samples + 1) * wide_samples + samples * (samples > kInt32Max ? 8 : 4);
    // Past 2^62 bytes no machine has it; the figure only has to stay a valid int64.
    const int64_t bytes = total > 0x1p62 ? (int64_t{1} << 62) : static_cast<int64_t>(total);
    check_can_allocate(bytes, "the sample indices of " + where + " (" +
                                  std::to_string(num_samples_total_) + " samples, " +
                                  std::to_string(num_epochs_) + " epochs)");
  }
  IndexCache cache(config_.cache_dir, "GPTDataset", description_);
  cache_description_path_ = config_.cache_dir.empty() ? "" : cache.description_path();
  if (cache.present()) {
    document_index_ = cache.load("document_index", num_epochs_ * documents_.size());
    sample_index_ = cache.load("sample_index", 2 * (num_samples_total_ + 1));
    shuffle_index_ = cache.load("shuffle_index", num_samples_total_);
    built_from_cache_ = true;
    spdlog::info("GPTDataset {}: loaded {} samples ({} epochs) from {} in {:.1f} s", where,
                 num_samples_total_, num_epochs_, cache.description_path(), seconds_since(t0));
    return;
  }
  build();
  cache.store("document_index", document_index_);
  cache.store("sample_index", sample_index_);
  cache.store("shuffle_index", shuffle_index_);
  cache.commit();
  spdlog::info("GPTDataset {}: built {} samples ({} epochs{}) in {:.1f} s{}", where,
               num_samples_total_, num_epochs_,
               separate_final_epoch_ ? ", separate final epoch" : "", seconds_since(t0),
               config_.cache_dir.empty() ? "" : ", cached as " + cache.description_path());
}

void GPTDataset::build() {
  // One numpy RandomState for the dataset, drawn by the document index, then the shuffle index
  // (Megatron's order). The recipe keeps the seed below 2^32 (data.seed).
  MTNLG_CHECK_LE(config_.seed, 0xffffffffULL);
  NumpyRandomState rng(static_cast<uint32_t>(config_.seed));
  document_index_ =
      build_document_index(documents_, num_epochs_, separate_final_epoch_, config_.shuffle, rng);
  sample_index_ = build_sample_index(*dataset_, document_index_, config_.seq_length,
                                     num_samples_total_, longest_document_);
  // Megatron's rule: the final epoch's samples are shuffled apart, after all the others.
  const int64_t first = separate_final_epoch_
                            ? num_samples_of(num_epochs_ - 1, tokens_per_epoch_, config_.seq_length)
                            : num_samples_total_;
  shuffle_index_ = build_shuffle_index(num_samples_total_, first, config_.shuffle, rng);
}

void GPTDataset::sample(int64_t i, int32_t* out) const {
  MTNLG_CHECK_GE(i, 0);
  MTNLG_CHECK_LT(i, size());
  const int64_t j = shuffle_index_[i];
  const int64_t first = sample_index_[2 * j], first_offset = sample_index_[2 * j + 1];
  const int64_t last = sample_index_[2 * j + 2], last_offset = sample_index_[2 * j + 3];
  int64_t written = 0;
  for (int64_t p = first; p <= last; ++p) {
    const int64_t doc = document_index_[p];
    const int64_t from = p == first ? first_offset : 0;
    const int64_t to = p == last ? last_offset + 1 : dataset_->sequence_length(doc);
    if (to > from) dataset_->read(doc, from, to - from, out + written);
    written += std::max<int64_t>(to - from, 0);
  }
  MTNLG_CHECK_EQ(written, config_.seq_length + 1);
}

void GPTDataset::check_vocab(int64_t vocab_size) const {
  check_vocab_range(*dataset_, documents_, vocab_size);
}

}  // namespace mtnlg
