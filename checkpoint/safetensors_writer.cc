// SafetensorsWriter: header serialisation and the temp-file / fsync / rename commit.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/safetensors.h"
#include "core/metrics.h"

namespace mtnlg {

namespace st = safetensors;

safetensors::DType to_safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return st::DType::kF32;
    case DType::kF64:
      return st::DType::kF64;
    case DType::kBF16:
      return st::DType::kBF16;
    case DType::kF16:
      return st::DType::kF16;
    case DType::kI32:
      return st::DType::kI32;
  }
  MTNLG_CHECK_MSG(false, "dtype " << static_cast<int>(dtype));
}

SafetensorsWriter::SafetensorsWriter(std::string path) : path_(std::move(path)) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

void SafetensorsWriter::add(const std::string& name, st::DType dtype, const Shape& shape,
                            const void* data, size_t bytes) {
  const size_t want = static_cast<size_t>(shape_numel(shape)) * st::dtype_info(dtype).itemsize;
  if (bytes != want)
    throw invalid_argument("tensor '" + name + "': " + std::to_string(bytes) + " bytes given, " +
                               std::string(st::dtype_info(dtype).name) + shape_str(shape) +
                               " needs " + std::to_string(want),
                           path_);
  Item item;
  item.entry.name = name;
  item.entry.dtype = dtype;
  item.entry.shape = shape;
  item.copy.resize(bytes);
  if (bytes) std::memcpy(item.copy.data(), data, bytes);
  for (const Item& it : items_)
    if (it.entry.name == name) throw invalid_argument("duplicate tensor '" + name + "'", path_);
  if (name == st::kMetadataKey || name.empty())
    throw invalid_argument("invalid tensor name '" + name + "'", path_);
  items_.push_back(std::move(item));
}

void SafetensorsWriter::add(const std::string& name, const Tensor& tensor) {
  MTNLG_CHECK_MSG(tensor.device() == Device::kCPU, "tensor '" << name << "' is " << tensor.str());
  if (name == st::kMetadataKey || name.empty())
    throw invalid_argument("invalid tensor name '" + name + "'", path_);
  for (const Item& it : items_)
    if (it.entry.name == name) throw invalid_argument("duplicate tensor '" + name + "'", path_);
  Item item;
  item.entry.name = name;
  item.entry.dtype = to_safetensors_dtype(tensor.dtype());
  item.entry.shape = tensor.shape();
  item.tensor = tensor;
  items_.push_back(std::move(item));
}

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::commit() {
  MTNLG_CHECK_MSG(!committed_, "commit() twice for " << path_);
  // Header: metadata first, then tensors in the order added; data in the same order.
  std::string header = "{";
  if (!metadata_.empty()) {
    header += json_string(std::string(st::kMetadataKey)) + ":{";
    bool first = true;
    for (const auto& [k, v] : metadata_) {
      if (!first) header += ',';
      header += json_string(k);
      header += ':';
      header += json_string(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    SafetensorsEntry& e = items_[i].entry;
    const uint64_t bytes =
        static_cast<uint64_t>(shape_numel(e.shape)) * st::dtype_info(e.dtype).itemsize;
    e.begin = offset;
    e.end = offset + bytes;
    offset = e.end;
    if (header.size() > 1) header += ",";
    header += json_string(e.name) + ":{\"dtype\":\"" + std::string(st::dtype_info(e.dtype).name) +
              "\",\"shape\":[";
    for (size_t d = 0; d < e.shape.size(); ++d) {
      if (d) header += ',';
      header += std::to_string(e.shape[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
  }
  header += "}";
  header.append((st::kDataAlignment - header.size() % st::kDataAlignment) % st::kDataAlignment,
                ' ');
  unsigned char len[st::kHeaderLengthBytes];
  for (size_t i = 0; i < st::kHeaderLengthBytes; ++i)
    len[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));

  std::string tmpl = path_ + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  Fd fd(::mkstemp(name.data()));
  if (fd.get() < 0) throw_errno("cannot create a temp file beside", path_);
  tmp_path_ = name.data();
  // mkstemp creates 0600; a checkpoint is as readable as any file the user writes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd.get(), 0666 & ~mask) != 0) throw_errno("cannot chmod", tmp_path_);

  Checksum sum;
  write_all(fd.get(), len, sizeof(len), tmp_path_, &sum);
  write_all(fd.get(), header.data(), header.size(), tmp_path_, &sum);
  for (const Item& it : items_) {
    if (it.tensor.defined()) {
      write_all(fd.get(), it.tensor.data(), it.tensor.nbytes(), tmp_path_, &sum);
    } else {
      write_all(fd.get(), it.copy.data(), it.copy.size(), tmp_path_, &sum);
    }
  }
  file_bytes_ = static_cast<int64_t>(sizeof(len) + header.size() + offset);
  checksum_ = sum.digest();
  if (::fsync(fd.get()) != 0) throw_errno("cannot fsync", tmp_path_);
  if (::close(fd.release()) != 0) throw_errno("cannot close", tmp_path_);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw_errno("cannot rename " + tmp_path_ + " to", path_);
  tmp_path_.clear();
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  fsync_dir(std::filesystem::path(path_).parent_path().string());
}

}  // namespace mtnlg
