#include "data/token_check.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/status.h"
#include "data/index_cache.h"

namespace mtnlg {

namespace {

// Plain loops over aligned copies: the compiler vectorises the max (the mapping may be unaligned).
template <typename T>
int64_t scan_max(const uint8_t* p, size_t n, int64_t* min_out) {
  constexpr size_t kChunk = 1 << 16;
  T block[kChunk];
  T hi = std::numeric_limits<T>::lowest(), lo = std::numeric_limits<T>::max();
  for (size_t done = 0; done < n; done += kChunk) {
    const size_t c = std::min(kChunk, n - done);
    std::memcpy(block, p + done * sizeof(T), c * sizeof(T));
    for (size_t i = 0; i < c; ++i) {
      hi = std::max(hi, block[i]);
      lo = std::min(lo, block[i]);
    }
  }
  *min_out = n ? static_cast<int64_t>(lo) : 0;
  return n ? static_cast<int64_t>(hi) : -1;
}

}  // namespace

int64_t max_token_id(const IndexedDataset& dataset, const std::string& cache_dir) {
  const std::span<const uint8_t> bin = dataset.raw_tokens();
  const std::string description =
      JsonText()
          .add("class", "TokenRange")
          .add("format_version", int64_t{1})
          .add("index_content_hash", hex64(hash64(dataset.raw_document_indices(),
                                                  hash64(dataset.raw_sequence_lengths()))))
          .add("bin_bytes", static_cast<int64_t>(bin.size()))
          .add("token_type", token_type_name(dataset.token_type()))
          .str();
  const IndexCache cache(cache_dir, "TokenRange", description);
  if (cache.present()) return cache.load("max", 1)[0];
  int64_t lo = 0, hi = -1;
  if (dataset.token_type() == TokenType::kUInt16) {
    hi = scan_max<uint16_t>(bin.data(), bin.size() / 2, &lo);
  } else {
    hi = scan_max<int32_t>(bin.data(), bin.size() / 4, &lo);
    if (lo < 0)
      throw corruption("token id " + std::to_string(lo) +
                           " is negative: the .bin is damaged or not int32 tokens; re-tokenize "
                           "with mtnlg-preprocess",
                       dataset.bin_path());
  }
  IndexArray values(1, IndexType::kInt64);
  values.set(0, hi);
  cache.store("max", values);
  cache.commit();
  return hi;
}

void check_token_ids(const DataConfig& cfg, int64_t vocab_size) {
  for (size_t k = 0; k < cfg.blend.size(); ++k) {
    const auto dataset = IndexedDataset::open(cfg.blend[k].prefix);
    const int64_t hi = max_token_id(*dataset, cfg.cache_dir);
    if (hi >= vocab_size)
      throw invalid_argument("token id " + std::to_string(hi) + " in " + dataset->bin_path() +
                                 " is not below model.vocab_size " + std::to_string(vocab_size) +
                                 "; the fix: set model.vocab_size to the tokenizer's vocabulary "
                                 "(50257 for GPT-2), or re-tokenize data.blend[" +
                                 std::to_string(k) + "] with the model's tokenizer",
                             "data.blend[" + std::to_string(k) + "]");
  }
}

}  // namespace mtnlg
