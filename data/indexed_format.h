// The on-disk format of Megatron-LM's indexed datasets (MMIDIDX, version 1): the one home of
// its constants, shared by IndexedDataset (reader), IndexedDatasetBuilder (writer) and
// scripts/prepare_demo_data.py (which repeats them; keep the two in step).
//
// A dataset is two files with a common prefix:
//   PREFIX.bin  the token ids of every sequence, back to back, in the token dtype
//   PREFIX.idx  little endian:
//     offset 0   magic "MMIDIDX\0\0"                          9 bytes
//     offset 9   version = 1                                  uint64
//     offset 17  token dtype code (TokenCode below)           uint8
//     offset 18  sequence count N                             uint64
//     offset 26  document-index count D (= documents + 1)     uint64
//     offset 34  sequence lengths, in tokens                  int32[N]
//                sequence pointers, byte offsets into .bin    int64[N]
//                document indices                             int64[D]
// Document i is sequences [document_indices[i], document_indices[i+1]); the first entry is 0
// and the entries never decrease. Megatron's preprocess_data.py writes one sequence per
// document, so document_indices is usually 0, 1, ..., N.
//
// Worked example: two documents, [15496, 995, 50256] and [262, 50256], as uint16 (code 8).
//   .bin (10 bytes): 88 3c e3 03 50 c4 | 06 01 50 c4
//   .idx (34 + 2*4 + 2*8 + 3*8 = 82 bytes):
//     4d 4d 49 44 49 44 58 00 00   magic
//     01 00 00 00 00 00 00 00      version 1
//     08                           uint16 tokens
//     02 00 00 00 00 00 00 00      N = 2 sequences
//     03 00 00 00 00 00 00 00      D = 3 document indices
//     03 00 00 00 02 00 00 00      lengths 3, 2
//     00 .. 00 | 06 00 .. 00       pointers 0, 6 (3 tokens * 2 bytes)
//     0, 1, 2 as int64             document indices
//
// Header-only constants; no state, safe from any thread.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mtnlg {

namespace idx_format {

// The reader and writer copy integers in host order; the format is little endian.
static_assert(std::endian::native == std::endian::little, "big-endian hosts are not supported");

inline constexpr std::string_view kMagic{"MMIDIDX\0\0", 9};
inline constexpr uint64_t kVersion = 1;
inline constexpr size_t kVersionOffset = 9;
inline constexpr size_t kDTypeOffset = 17;
inline constexpr size_t kSequenceCountOffset = 18;
inline constexpr size_t kDocumentIndexCountOffset = 26;
inline constexpr size_t kHeaderBytes = 34;  // the arrays start here

inline constexpr const char* kIdxSuffix = ".idx";
inline constexpr const char* kBinSuffix = ".bin";

// Megatron's DType codes (megatron/core/datasets/indexed_dataset.py).
enum class TokenCode : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

// Name of a dtype code ("uint16"), or nullptr for a code Megatron does not define.
constexpr const char* token_code_name(uint8_t code) {
  switch (code) {
    case 1:
      return "uint8";
    case 2:
      return "int8";
    case 3:
      return "int16";
    case 4:
      return "int32";
    case 5:
      return "int64";
    case 6:
      return "float64";
    case 7:
      return "float32";
    case 8:
      return "uint16";
    default:
      return nullptr;
  }
}

}  // namespace idx_format

// The token types this trainer reads and writes; the values are the format's dtype codes.
// uint16 covers vocabularies below 65536 (GPT-2's 50257), as Megatron chooses; int32 the rest.
enum class TokenType : uint8_t {
  kUInt16 = static_cast<uint8_t>(idx_format::TokenCode::kUInt16),
  kInt32 = static_cast<uint8_t>(idx_format::TokenCode::kInt32),
};

constexpr size_t token_size(TokenType type) {
  return type == TokenType::kUInt16 ? 2 : 4;
}
constexpr const char* token_type_name(TokenType type) {
  return type == TokenType::kUInt16 ? "uint16" : "int32";
}

}  // namespace mtnlg
