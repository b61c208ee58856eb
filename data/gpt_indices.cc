#include "data/gpt_indices.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/host_memory.h"
#include "core/status.h"

namespace mtnlg {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

}  // namespace

int index_type_width(IndexType type) {
  switch (type) {
    case IndexType::kInt16:
      return 2;
    case IndexType::kInt32:
    case IndexType::kUInt32:
      return 4;
    case IndexType::kInt64:
      break;
  }
  return 8;
}

const char* index_type_name(IndexType type) {
  switch (type) {
    case IndexType::kInt16:
      return "int16";
    case IndexType::kInt32:
      return "int32";
    case IndexType::kUInt32:
      return "uint32";
    case IndexType::kInt64:
      break;
  }
  return "int64";
}

IndexArray::IndexArray(int64_t size, IndexType type) : type_(type), size_(size) {
  MTNLG_CHECK_GE(size, 0);
  // Sized by the run's length and touched at once: refuse rather than be OOM-killed.
  check_can_allocate(size * width(), "a data index of " + std::to_string(size) + " entries");
  const auto n = static_cast<size_t>(size);
  switch (type_) {
    case IndexType::kInt16:
      i16_.resize(n);
      break;
    case IndexType::kInt32:
      i32_.resize(n);
      break;
    case IndexType::kUInt32:
      u32_.resize(n);
      break;
    case IndexType::kInt64:
      i64_.resize(n);
      break;
  }
}

void* IndexArray::data() {
  return const_cast<void*>(static_cast<const IndexArray&>(*this).data());
}

const void* IndexArray::data() const {
  switch (type_) {
    case IndexType::kInt16:
      return i16_.data();
    case IndexType::kInt32:
      return i32_.data();
    case IndexType::kUInt32:
      return u32_.data();
    case IndexType::kInt64:
      break;
  }
  return i64_.data();
}

bool IndexArray::operator==(const IndexArray& o) const {
  return type_ == o.type_ && i16_ == o.i16_ && i32_ == o.i32_ && u32_ == o.u32_ && i64_ == o.i64_;
}

RangeTokens count_range_tokens(const IndexedDataset& dataset, DocumentRange documents) {
  RangeTokens r;
  for (int64_t d = documents.begin; d < documents.end; ++d) {
    const int64_t len = dataset.sequence_length(d);
    r.tokens += len;
    r.longest_document = std::max(r.longest_document, len);
  }
  return r;
}

int64_t num_epochs_for(int64_t tokens_per_epoch, int64_t num_samples, int64_t seq_length) {
  MTNLG_CHECK_GT(tokens_per_epoch, 0);
  MTNLG_CHECK_GE(num_samples, 0);
  MTNLG_CHECK_GT(seq_length, 0);
  MTNLG_CHECK_LE(num_samples, (std::numeric_limits<int64_t>::max() - 1) / seq_length);
  const int64_t needed = num_samples * seq_length + 1;
  return std::max<int64_t>(1, (needed + tokens_per_epoch - 1) / tokens_per_epoch);
}

int64_t num_samples_of(int64_t epochs, int64_t tokens_per_epoch, int64_t seq_length) {
  MTNLG_CHECK_LE(epochs, std::numeric_limits<int64_t>::max() / tokens_per_epoch);
  return (epochs * tokens_per_epoch - 1) / seq_length;
}

bool separate_final_epoch(int64_t epochs, int64_t tokens_per_epoch, int64_t num_samples,
                          int64_t seq_length) {
  if (epochs <= 1) return false;
  const int64_t before = num_samples_of(epochs - 1, tokens_per_epoch, seq_length);
  const int64_t from_final = num_samples - before;
  const int64_t per_epoch = (tokens_per_epoch - 1) / seq_length;
  MTNLG_CHECK_GE(from_final, 0);
  MTNLG_CHECK_LE(from_final, per_epoch + 1);
  // Python's int(0.80 * x) truncates toward zero, as the cast does.
  return from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
}

void shuffle_range(IndexArray& a, int64_t begin, int64_t end, NumpyRandomState& rng) {
  MTNLG_CHECK(0 <= begin && begin <= end && end <= a.size());
  // numpy's shuffle draws the same swaps whatever the dtype.
  switch (a.type()) {
    case IndexType::kInt16:
      rng.shuffle(static_cast<int16_t*>(a.data()) + begin, end - begin);
      return;
    case IndexType::kInt32:
      rng.shuffle(static_cast<int32_t*>(a.data()) + begin, end - begin);
      return;
    case IndexType::kUInt32:
      rng.shuffle(static_cast<uint32_t*>(a.data()) + begin, end - begin);
      return;
    case IndexType::kInt64:
      rng.shuffle(static_cast<int64_t*>(a.data()) + begin, end - begin);
      return;
  }
}

IndexArray build_document_index(DocumentRange documents, int64_t epochs, bool separate_final,
                                bool shuffle, NumpyRandomState& rng) {
  MTNLG_CHECK_GT(epochs, 0);
  const int64_t n = documents.size();
  MTNLG_CHECK_GT(n, 0);
  MTNLG_CHECK_LE(epochs, std::numeric_limits<int64_t>::max() / n);
  IndexArray index(epochs * n,
                   documents.end - 1 > kInt32Max ? IndexType::kInt64 : IndexType::kInt32);
  for (int64_t e = 0; e < epochs; ++e)
    for (int64_t k = 0; k < n; ++k) index.set(e * n + k, documents.begin + k);
  if (shuffle) {
    // Megatron: the tiled copies shuffled as one array; with a separate final epoch the first
    // E - 1 copies, then the last one.
    const int64_t cut = separate_final && epochs > 1 ? (epochs - 1) * n : epochs * n;
    shuffle_range(index, 0, cut, rng);
    if (cut < epochs * n) shuffle_range(index, cut, epochs * n, rng);
  }
  return index;
}

IndexArray build_sample_index(const IndexedDataset& dataset, const IndexArray& document_index,
                              int64_t seq_length, int64_t num_samples, int64_t longest_document) {
  MTNLG_CHECK_GT(seq_length, 0);
  MTNLG_CHECK_GE(num_samples, 0);
  const bool wide = document_index.size() > kInt32Max || longest_document > kInt32Max;
  IndexArray index(2 * (num_samples + 1), wide ? IndexType::kInt64 : IndexType::kInt32);
  // Walk the stream once: `start` is the stream offset of document position p. Boundary i is
  // the position of token i*S; empty documents are stepped over, so offset < length always.
  int64_t p = 0, start = 0;
  int64_t len = document_index.size() > 0 ? dataset.sequence_length(document_index[0]) : 0;
  for (int64_t i = 0; i <= num_samples; ++i) {
    const int64_t token = i * seq_length;
    while (token >= start + len) {
      start += len;
      ++p;
      MTNLG_CHECK_MSG(p < document_index.size(),
                      "the document index holds too few tokens for " << num_samples << " samples");
      len = dataset.sequence_length(document_index[p]);
    }
    index.set(2 * i, p);
    index.set(2 * i + 1, token - start);
  }
  return index;
}

IndexArray build_shuffle_index(int64_t num_samples, int64_t first, bool shuffle,
                               NumpyRandomState& rng) {
  MTNLG_CHECK(0 <= first && first <= num_samples);
  // Megatron: uint32 unless the size reaches numpy.iinfo(uint32).max - 1.
  constexpr int64_t kUInt32Limit = int64_t{std::numeric_limits<uint32_t>::max()} - 1;
  IndexArray index(num_samples,
                   num_samples >= kUInt32Limit ? IndexType::kInt64 : IndexType::kUInt32);
  for (int64_t i = 0; i < num_samples; ++i) index.set(i, i);
  if (shuffle) {
    shuffle_range(index, 0, first, rng);
    if (first < num_samples) shuffle_range(index, first, num_samples, rng);
  }
  return index;
}

}  // namespace mtnlg
