#include "data/indexed_dataset.h"

#include <cstring>
#include <filesystem>
#include <string>

#include "core/status.h"

namespace mtnlg {

namespace {

constexpr const char* kRemakeFix =
    "the fix: re-create the dataset with mtnlg-preprocess (or Megatron's "
    "tools/preprocess_data.py)";

// Little-endian load from possibly unaligned memory (the .idx arrays are not aligned).
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::shared_ptr<IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  // A prefix given with its file's suffix: say so rather than "no such file PREFIX.bin.idx".
  for (const std::string suffix : {idx_format::kBinSuffix, idx_format::kIdxSuffix}) {
    if (prefix.size() > suffix.size() &&
        prefix.compare(prefix.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        !std::filesystem::exists(prefix + idx_format::kIdxSuffix)) {
      const std::string bare = prefix.substr(0, prefix.size() - suffix.size());
      throw not_found("a dataset is named by its prefix, without " + suffix + "; the fix: " + bare +
                          " (for " + bare + ".bin and " + bare + ".idx)",
                      prefix);
    }
  }
  const std::string fix =
      "the fix: check the dataset prefix in data.blend (it names PREFIX for PREFIX.bin and "
      "PREFIX.idx) or create it with mtnlg-preprocess --input DOCS.jsonl --output-prefix PREFIX";
  MappedFile idx(prefix + idx_format::kIdxSuffix, fix);
  MappedFile bin(prefix + idx_format::kBinSuffix, fix);
  // Not make_shared: the constructor is private.
  std::shared_ptr<IndexedDataset> ds(new IndexedDataset(prefix, std::move(idx), std::move(bin)));
  ds->parse_index();
  return ds;
}

IndexedDataset::IndexedDataset(std::string prefix, MappedFile idx, MappedFile bin)
    : prefix_(std::move(prefix)), idx_(std::move(idx)), bin_(std::move(bin)) {}

void IndexedDataset::parse_index() {
  const std::string idx_name = idx_.path();
  const uint8_t* p = idx_.data();
  const uint64_t size = idx_.size();

  if (size < idx_format::kHeaderBytes) {
    throw corruption("index is " + std::to_string(size) + " bytes, shorter than the " +
                         std::to_string(idx_format::kHeaderBytes) + "-byte header; " + kRemakeFix,
                     idx_name);
  }
  if (std::memcmp(p, idx_format::kMagic.data(), idx_format::kMagic.size()) != 0) {
    throw corruption(
        "not a Megatron indexed dataset (the file does not start with the MMIDIDX magic); the "
        "fix: point data.blend at the prefix of a .bin/.idx pair written by mtnlg-preprocess "
        "or Megatron's preprocess_data.py (the old 'lazy'/'cached' formats are not supported)",
        idx_name);
  }
  const uint64_t version = load<uint64_t>(p + idx_format::kVersionOffset);
  if (version != idx_format::kVersion) {
    // Megatron's .idx has only ever been version 1: anything else is a damaged or foreign file.
    throw corruption("index format version " + std::to_string(version) +
                         " (Megatron's .idx is version 1: the file is damaged or not an index); " +
                         kRemakeFix,
                     idx_name);
  }
  const uint8_t code = p[idx_format::kDTypeOffset];
  const char* code_name = idx_format::token_code_name(code);
  if (code_name == nullptr) {
    throw corruption("unknown token dtype code " + std::to_string(code) +
                         " (Megatron's codes are 1..8); " + kRemakeFix,
                     idx_name);
  }
  if (code == static_cast<uint8_t>(TokenType::kUInt16)) {
    token_type_ = TokenType::kUInt16;
  } else if (code == static_cast<uint8_t>(TokenType::kInt32)) {
    token_type_ = TokenType::kInt32;
  } else {
    throw unsupported(
        std::string("token dtype ") + code_name +
            " is not supported (only uint16 and int32 token files are); the fix: "
            "re-tokenize with mtnlg-preprocess or Megatron's preprocess_data.py, which "
            "write uint16 for "
            "vocabularies below 65500 and int32 otherwise",
        idx_name);
  }

  const uint64_t n = load<uint64_t>(p + idx_format::kSequenceCountOffset);
  const uint64_t d = load<uint64_t>(p + idx_format::kDocumentIndexCountOffset);
  // Compare counts against the size before multiplying, so a garbage count cannot overflow.
  const uint64_t body = size - idx_format::kHeaderBytes;
  if (n > body / 12 || d > body / 8 || 12 * n + 8 * d > body) {
    throw corruption("index is " + std::to_string(size) + " bytes, too short for its " +
                         std::to_string(n) + " sequences and " + std::to_string(d) +
                         " document indices (truncated?); " + kRemakeFix,
                     idx_name);
  }
  if (12 * n + 8 * d != body) {
    throw corruption("index has " + std::to_string(body - 12 * n - 8 * d) + " bytes after its " +
                         std::to_string(n) + " sequences and " + std::to_string(d) +
                         " document indices (a count lowered, or two files joined); " + kRemakeFix,
                     idx_name);
  }
  lengths_offset_ = idx_format::kHeaderBytes;
  pointers_offset_ = lengths_offset_ + 4 * n;
  documents_offset_ = pointers_offset_ + 8 * n;
  num_sequences_ = static_cast<int64_t>(n);
  num_documents_ = static_cast<int64_t>(d) - 1;  // -1 when d == 0: rejected below

  // Every sequence must lie inside .bin: a shorter .bin was truncated (an interrupted copy).
  // One pass over the arrays in file order, read in place (see the header).
  const uint64_t bin_size = bin_.size();
  const uint64_t item = token_size(token_type_);
  const uint8_t* lengths_at = p + lengths_offset_;
  const uint8_t* pointers_at = p + pointers_offset_;
  num_tokens_ = 0;
  uint64_t expected = 0;  // Megatron's sequences are contiguous in .bin, in order, from byte 0
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t len = load<int32_t>(lengths_at + 4 * i);
    const int64_t ptr = load<int64_t>(pointers_at + 8 * i);
    const uint64_t end = static_cast<uint64_t>(ptr) + static_cast<uint64_t>(len) * item;
    if ((len | ptr) >= 0 && end <= bin_size && static_cast<uint64_t>(ptr) == expected) {
      num_tokens_ += len;  // the common case: one branch per sequence
      expected = end;
      continue;
    }
    if (len < 0 || ptr < 0) {
      throw corruption("sequence " + std::to_string(i) + " has length " + std::to_string(len) +
                           " and byte offset " + std::to_string(ptr) + "; " + kRemakeFix,
                       idx_name);
    }
    if (end > bin_size)
      throw corruption("sequence " + std::to_string(i) + " spans bytes [" + std::to_string(ptr) +
                           ", " + std::to_string(end) + ") but " + bin_.path() + " has " +
                           std::to_string(bin_size) +
                           " bytes (truncated .bin, or .idx from another dataset); " + kRemakeFix,
                       bin_.path());
    throw corruption("sequence " + std::to_string(i) + " starts at byte " + std::to_string(ptr) +
                         " but the one before it ends at byte " + std::to_string(expected) +
                         " (sequences of a Megatron dataset are contiguous: overlapping or "
                         "gapped lengths and pointers); " +
                         kRemakeFix,
                     idx_name);
  }
  if (expected != bin_size) {
    throw corruption(bin_.path() + " has " + std::to_string(bin_size) + " bytes but the index's " +
                         std::to_string(n) + " sequences of " + token_type_name(token_type_) +
                         " tokens cover " + std::to_string(expected) +
                         " (a .bin of another dataset, or tokens of another width than the "
                         "index says); " +
                         kRemakeFix,
                     bin_.path());
  }

  const uint8_t* docs_at = p + documents_offset_;
  const int64_t first = d == 0 ? -1 : load<int64_t>(docs_at);
  if (first != 0) {
    throw corruption(std::string("document indices must start with 0 (") +
                         (d == 0 ? "there are none" : "first is " + std::to_string(first)) + "); " +
                         kRemakeFix,
                     idx_name);
  }
  one_sequence_per_document_ = d == n + 1;
  int64_t prev = 0;
  for (uint64_t i = 1; i < d; ++i) {
    const int64_t cur = load<int64_t>(docs_at + 8 * i);
    one_sequence_per_document_ = one_sequence_per_document_ && cur == static_cast<int64_t>(i);
    if (cur < prev || cur > static_cast<int64_t>(n)) {
      throw corruption("document index " + std::to_string(i) + " is " + std::to_string(cur) +
                           " after " + std::to_string(prev) +
                           " (document indices must not decrease and must stay within the " +
                           std::to_string(n) + " sequences); " + kRemakeFix,
                       idx_name);
    }
    prev = cur;
  }
  if (d > 0 && prev != static_cast<int64_t>(n)) {
    throw corruption("the last document index is " + std::to_string(prev) + " but there are " +
                         std::to_string(n) +
                         " sequences: the documents cover only part of the data (a count "
                         "lowered?); " +
                         kRemakeFix,
                     idx_name);
  }
}

int64_t IndexedDataset::sequence_pointer(int64_t seq) const {
  return load<int64_t>(idx_.data() + pointers_offset_ + 8 * static_cast<size_t>(seq));
}

int64_t IndexedDataset::sequence_length(int64_t seq) const {
  MTNLG_CHECK_GE(seq, 0);
  MTNLG_CHECK_LT(seq, num_sequences());
  return load<int32_t>(idx_.data() + lengths_offset_ + 4 * static_cast<size_t>(seq));
}

int64_t IndexedDataset::document_index(int64_t i) const {
  MTNLG_CHECK_GE(i, 0);
  MTNLG_CHECK_LE(i, num_documents_);
  return load<int64_t>(idx_.data() + documents_offset_ + 8 * static_cast<size_t>(i));
}

int64_t IndexedDataset::document_length(int64_t doc) const {
  const uint8_t* lengths = idx_.data() + lengths_offset_;
  if (one_sequence_per_document_) return load<int32_t>(lengths + 4 * static_cast<size_t>(doc));
  const uint8_t* docs = idx_.data() + documents_offset_;
  const int64_t end = load<int64_t>(docs + 8 * static_cast<size_t>(doc + 1));
  int64_t total = 0;
  for (int64_t s = load<int64_t>(docs + 8 * static_cast<size_t>(doc)); s < end; ++s) {
    total += load<int32_t>(lengths + 4 * static_cast<size_t>(s));
  }
  return total;
}

std::span<const uint8_t> IndexedDataset::raw_sequence_lengths() const {
  return {idx_.data() + lengths_offset_, 4 * static_cast<size_t>(num_sequences_)};
}

std::span<const uint8_t> IndexedDataset::raw_document_indices() const {
  return {idx_.data() + documents_offset_, 8 * static_cast<size_t>(num_documents_ + 1)};
}

void IndexedDataset::read(int64_t seq, int64_t offset, int64_t count, int32_t* out) const {
  const int64_t len = sequence_length(seq);
  MTNLG_CHECK_GE(offset, 0);
  MTNLG_CHECK_GE(count, 0);
  MTNLG_CHECK_LE(offset + count, len);
  if (count == 0) return;
  const uint8_t* src = bin_.data() + sequence_pointer(seq);
  if (token_type_ == TokenType::kInt32) {
    std::memcpy(out, src + 4 * offset, 4 * static_cast<size_t>(count));
    return;
  }
  src += 2 * offset;
  for (int64_t i = 0; i < count; ++i) out[i] = load<uint16_t>(src + 2 * i);
}

}  // namespace mtnlg
