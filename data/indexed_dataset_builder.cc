#include "data/indexed_dataset_builder.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/status.h"

namespace mtnlg {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// Flushes stdio buffers and the page cache for `f`, then closes it; throws on any failure.
void flush_sync_close(std::FILE* f, const std::string& path) {
  bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const std::string why = ok ? "" : errno_text();
  if (std::fclose(f) != 0 && ok) throw io_error("cannot close: " + errno_text(), path);
  if (!ok) throw io_error("cannot flush to disk: " + why + " (disk full?)", path);
}

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

IndexedDatasetBuilder::IndexedDatasetBuilder(const std::string& prefix, TokenType token_type)
    : prefix_(prefix), token_type_(token_type) {
  const std::string tag = ".tmp-" + std::to_string(::getpid());
  bin_tmp_ = prefix_ + idx_format::kBinSuffix + tag;
  idx_tmp_ = prefix_ + idx_format::kIdxSuffix + tag;
  bin_ = std::fopen(bin_tmp_.c_str(), "wb");
  if (bin_ == nullptr) {
    throw io_error("cannot create: " + errno_text() + "; the fix: create the output directory",
                   bin_tmp_);
  }
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (!finished_) remove_temps();
}

void IndexedDatasetBuilder::remove_temps() noexcept {
  if (bin_ != nullptr) std::fclose(bin_);
  bin_ = nullptr;
  std::remove(bin_tmp_.c_str());
  std::remove(idx_tmp_.c_str());
}

void IndexedDatasetBuilder::write_bin(const void* data, size_t bytes) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, bin_) != bytes) {
    throw io_error("cannot write: " + errno_text() + " (disk full?)", bin_tmp_);
  }
}

void IndexedDatasetBuilder::add_document(std::span<const int32_t> tokens,
                                         std::span<const int32_t> sequence_lengths) {
  MTNLG_CHECK_MSG(!finished_, "add_document after finish");
  int64_t sum = 0;
  for (const int32_t len : sequence_lengths) {
    MTNLG_CHECK_GT(len, 0);
    sum += len;
  }
  MTNLG_CHECK(sequence_lengths.empty() || sum == static_cast<int64_t>(tokens.size()));
  MTNLG_CHECK_LE(tokens.size(), static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const int64_t max_id = token_type_ == TokenType::kUInt16 ? 65535 : 0x7fffffff;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > max_id) {
      throw invalid_argument(
          "token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
              " of document " + std::to_string(num_documents()) + " does not fit " +
              token_type_name(token_type_) +
              (token_type_ == TokenType::kUInt16
                   ? "; the fix: write the dataset with int32 tokens (vocabulary >= 65536)"
                   : "; token ids must be non-negative"),
          prefix_);
    }
  }
  if (token_type_ == TokenType::kInt32) {
    write_bin(tokens.data(), tokens.size() * sizeof(int32_t));
  } else {
    staging_.assign(tokens.begin(), tokens.end());
    write_bin(staging_.data(), staging_.size() * sizeof(uint16_t));
  }
  if (!sequence_lengths.empty()) {
    lengths_.insert(lengths_.end(), sequence_lengths.begin(), sequence_lengths.end());
  } else if (!tokens.empty()) {
    lengths_.push_back(static_cast<int32_t>(tokens.size()));
  }
  document_index_.push_back(static_cast<int64_t>(lengths_.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetBuilder::finish() {
  MTNLG_CHECK_MSG(!finished_, "finish called twice");
  std::FILE* bin = bin_;
  bin_ = nullptr;  // closed below whatever happens
  flush_sync_close(bin, bin_tmp_);

  const uint64_t n = lengths_.size();
  std::vector<uint8_t> idx;
  idx.reserve(idx_format::kHeaderBytes + 12 * n + 8 * document_index_.size());
  idx.insert(idx.end(), idx_format::kMagic.begin(), idx_format::kMagic.end());
  append<uint64_t>(idx, idx_format::kVersion);
  append<uint8_t>(idx, static_cast<uint8_t>(token_type_));
  append<uint64_t>(idx, n);
  append<uint64_t>(idx, document_index_.size());
  for (int32_t len : lengths_) append<int32_t>(idx, len);
  int64_t pointer = 0;
  for (int32_t len : lengths_) {
    append<int64_t>(idx, pointer);
    pointer += static_cast<int64_t>(len) * static_cast<int64_t>(token_size(token_type_));
  }
  for (const int64_t d : document_index_) append<int64_t>(idx, d);

  std::FILE* f = std::fopen(idx_tmp_.c_str(), "wb");
  if (f == nullptr) throw io_error("cannot create: " + errno_text(), idx_tmp_);
  if (std::fwrite(idx.data(), 1, idx.size(), f) != idx.size()) {
    std::fclose(f);
    throw io_error("cannot write: " + errno_text() + " (disk full?)", idx_tmp_);
  }
  flush_sync_close(f, idx_tmp_);

  // .bin first: a reader that finds the new .idx also finds the .bin it describes.
  const std::string bin_final = prefix_ + idx_format::kBinSuffix;
  const std::string idx_final = prefix_ + idx_format::kIdxSuffix;
  if (std::rename(bin_tmp_.c_str(), bin_final.c_str()) != 0) {
    throw io_error("cannot rename " + bin_tmp_ + " into place: " + errno_text(), bin_final);
  }
  if (std::rename(idx_tmp_.c_str(), idx_final.c_str()) != 0) {
    throw io_error("cannot rename " + idx_tmp_ + " into place: " + errno_text(), idx_final);
  }
  finished_ = true;
}

}  // namespace mtnlg
