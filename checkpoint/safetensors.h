// Safetensors files (format: checkpoint/safetensors_format.h): a validating, mmap-based reader
// and an atomic writer.
//
// SafetensorsFile maps the file read-only for its lifetime and validates the whole header at
// open, so a corrupt file fails at once with an error naming the file and the tensor. read()
// returns a new CPU tensor converted to the requested dtype; raw() borrows the mapped bytes.
// A SafetensorsFile is immutable after construction: concurrent reads are thread-safe.
//
// SafetensorsWriter collects tensors (keeping a handle to each, or a copy of raw bytes) and
// metadata, and commit() writes `path.tmp-XXXXXX`, fsyncs it, renames it over `path` and fsyncs
// the directory: readers see the old file or the complete new one, never a partial one. A
// writer destroyed without commit() leaves nothing behind. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors_format.h"
#include "core/tensor.h"

namespace mtnlg {

struct SafetensorsEntry {
  std::string name;
  safetensors::DType dtype = safetensors::DType::kF32;
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws not_found / io_error / corruption naming the file.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Entries in data order (sorted by begin offset).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws not_found naming the tensor and the file.
  const SafetensorsEntry& entry(const std::string& name) const;
  // The tensor's bytes in the mapping (valid while this object lives).
  std::span<const std::byte> raw(const std::string& name) const;
  // The whole file's bytes (checksums).
  std::span<const std::byte> file_bytes() const { return {map_, map_bytes_}; }

  // A new CPU tensor holding `name` converted to `dtype`:
  //   kF32 / kF64 from F64, F32, F16, BF16, I64, I32 (integers convert exactly up to 2^24 / 2^53);
  //   kI32 from I32, or from I64 when every value fits.
  // Other combinations throw unsupported naming the tensor and both dtypes.
  Tensor read(const std::string& name, DType dtype) const;

 private:
  std::string path_;
  const std::byte* map_ = nullptr;
  size_t map_bytes_ = 0;
  const std::byte* data_ = nullptr;  // start of the data section
  size_t data_bytes_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

// Our tensor dtype as a safetensors dtype (kF32 -> F32, kF64 -> F64, kBF16, kF16, kI32).
safetensors::DType to_safetensors_dtype(DType dtype);

class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path);
  ~SafetensorsWriter();  // removes the temp file of an unfinished commit
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Copies `bytes` (must equal numel(shape) * itemsize). Names are unique and not
  // "__metadata__"; violations throw invalid_argument.
  void add(const std::string& name, safetensors::DType dtype, const Shape& shape, const void* data,
           size_t bytes);
  // Keeps a handle on a CPU tensor (no copy): do not modify it before commit().
  void add(const std::string& name, const Tensor& tensor);
  void add_metadata(const std::string& key, const std::string& value);

  // Writes the file atomically (see above); throws io_error naming the path. Once only.
  void commit();

  const std::string& path() const { return path_; }
  // After commit(): the file's size and its XXH3-64 (checkpoint/file_io.h), computed from the
  // bytes as they were written.
  int64_t file_bytes() const { return file_bytes_; }
  uint64_t checksum() const { return checksum_; }

 private:
  struct Item {
    SafetensorsEntry entry;
    Tensor tensor;                // either a tensor handle ...
    std::vector<std::byte> copy;  // ... or copied bytes
  };
  std::string path_;
  std::string tmp_path_;  // non-empty while a temp file exists
  bool committed_ = false;
  int64_t file_bytes_ = 0;
  uint64_t checksum_ = 0;
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mtnlg
