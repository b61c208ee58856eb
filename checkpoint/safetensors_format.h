// The safetensors file format (https://github.com/huggingface/safetensors), its constants and
// dtype table, shared by the reader and the writer (checkpoint/safetensors.h).
//
// Layout:
//   bytes [0, 8)        N: the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    the header: a UTF-8 JSON object
//                       { "__metadata__": {string: string, ...},          (optional)
//                         "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...],
//                                           "data_offsets": [begin, end]}, ... }
//                       padded with trailing spaces (our writer pads N to a multiple of 8, so the
//                       data starts 8-byte aligned)
//   bytes [8 + N, EOF)  the data section: each tensor's bytes, row-major, little-endian, at
//                       [begin, end) relative to the data section's start
// Rules the reader enforces (as the reference implementation does): end - begin ==
// numel * itemsize (numel of shape [] is 1), and the tensors, sorted by begin, tile the data
// section exactly: the first begins at 0, each begins where the previous ends (no overlap, no
// gap) and the last ends at EOF.
//
// Worked example: one tensor "a", F32, shape [2], values {1.0, 2.0}, no metadata.
//   header text (54 bytes):  {"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}
//   padded with 2 spaces to 56 bytes, so the file is
//   38 00 00 00 00 00 00 00     N = 56
//   7b 22 61 22 ... 7d 7d 20 20  header + padding
//   00 00 80 3f 00 00 00 40     1.0f, 2.0f little-endian
//   total 8 + 56 + 8 = 72 bytes (safetensors_test.cc checks these exact bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mtnlg::safetensors {

inline constexpr size_t kHeaderLengthBytes = 8;
// The reference implementation refuses headers above 100 MB; so do we, before allocating.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Header padding: the data section starts at a multiple of this.
inline constexpr size_t kDataAlignment = 8;
inline constexpr std::string_view kMetadataKey = "__metadata__";

// Every dtype the format names. Only the float and 32/64-bit integer ones convert to our
// tensors; the others are validated (for their sizes) and reported as unsupported on read.
enum class DType {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
  kF8E4M3,
  kF8E5M2
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // as written in the header
  size_t itemsize;        // bytes
};

inline constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 1}, {DType::kU8, "U8", 1},          {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},   {DType::kU16, "U16", 2},        {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI32, "I32", 4},        {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},   {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},   {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
};

inline const DTypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

inline const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d;
  return kDTypes[0];  // unreachable: the table lists every enumerator
}

}  // namespace mtnlg::safetensors
