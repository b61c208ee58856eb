// SafetensorsFile: mmap, header validation and dtype conversion.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "checkpoint/json_parse.h"
#include "checkpoint/safetensors.h"
#include "core/input_file.h"
#include "core/mapped_inputs.h"

namespace mtnlg {

namespace st = safetensors;

namespace {

std::string quoted(const std::string& name) {
  return "tensor '" + name + "'";
}

// One entry of the header, validated against the dtype table and itself (not yet the data).
SafetensorsEntry parse_entry(const std::string& name, const JsonValue& v, const std::string& path) {
  auto bad = [&](const std::string& msg) { return corruption(quoted(name) + ": " + msg, path); };
  if (!v.is_object())
    throw bad("header entry is a JSON " + std::string(json_kind_name(v.kind)) +
              ", expected an object with dtype, shape, data_offsets");
  const JsonValue* dtype = v.find("dtype");
  const JsonValue* shape = v.find("shape");
  const JsonValue* offsets = v.find("data_offsets");
  if (!dtype || !dtype->is_string()) throw bad("missing or non-string \"dtype\"");
  if (!shape || !shape->is_array()) throw bad("missing or non-array \"shape\"");
  if (!offsets || !offsets->is_array()) throw bad("missing or non-array \"data_offsets\"");
  const st::DTypeInfo* info = st::find_dtype(dtype->text);
  if (!info) throw bad("unknown dtype \"" + dtype->text + "\"");

  SafetensorsEntry e;
  e.name = name;
  e.dtype = info->dtype;
  // numel * itemsize must not overflow: bound it by the largest possible file.
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  uint64_t numel = 1;
  for (const JsonValue& d : shape->items) {
    int64_t n = 0;
    if (!d.to_int64(&n) || n < 0) throw bad("shape entries must be non-negative integers");
    e.shape.push_back(n);
    if (n != 0 && numel > kLimit / static_cast<uint64_t>(n)) throw bad("shape too large");
    numel *= static_cast<uint64_t>(n);
  }
  int64_t begin = 0, end = 0;
  if (offsets->items.size() != 2 || !offsets->items[0].to_int64(&begin) ||
      !offsets->items[1].to_int64(&end) || begin < 0 || end < begin)
    throw bad("data_offsets must be [begin, end] with 0 <= begin <= end");
  e.begin = static_cast<uint64_t>(begin);
  e.end = static_cast<uint64_t>(end);
  if (numel > kLimit / info->itemsize) throw bad("shape too large");
  const uint64_t want = numel * info->itemsize;
  if (e.end - e.begin != want)
    throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
              std::to_string(e.end - e.begin) + " bytes, but " + std::string(info->name) +
              shape_str(e.shape) + " needs " + std::to_string(want));
  return e;
}

template <typename T>
T load(const std::byte* p) {  // the mapping may be unaligned for files other writers made
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float bf16_to_f32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    u = sign | (exp << 23) | ((mant & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element i of a float or integer tensor as double.
double element(st::DType dt, const std::byte* p, size_t i) {
  switch (dt) {
    case st::DType::kF64:
      return load<double>(p + 8 * i);
    case st::DType::kF32:
      return load<float>(p + 4 * i);
    case st::DType::kF16:
      return f16_to_f32(load<uint16_t>(p + 2 * i));
    case st::DType::kBF16:
      return bf16_to_f32(load<uint16_t>(p + 2 * i));
    case st::DType::kI64:
      return static_cast<double>(load<int64_t>(p + 8 * i));
    case st::DType::kI32:
      return load<int32_t>(p + 4 * i);
    default:
      return 0.0;  // callers check the dtype first
  }
}

bool converts_to_float(st::DType dt) {
  return dt == st::DType::kF64 || dt == st::DType::kF32 || dt == st::DType::kF16 ||
         dt == st::DType::kBF16 || dt == st::DType::kI64 || dt == st::DType::kI32;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // A regular file, checked before it could block (a FIFO); the mapping outlives the descriptor.
  const InputFile file(path, "give the path of a .safetensors file");
  const size_t size = static_cast<size_t>(file.size());
  if (size < st::kHeaderLengthBytes) {
    throw corruption("file is " + std::to_string(size) +
                         " bytes, too short for the 8-byte header length: not a safetensors file",
                     path);
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  const int map_err = errno;
  if (m == MAP_FAILED) throw io_error(std::string("cannot mmap: ") + std::strerror(map_err), path);
  map_ = static_cast<const std::byte*>(m);
  map_bytes_ = size;
  register_mapped_input(map_, map_bytes_, path);  // a SIGBUS here names the file
  // Readers go through the file front to back: read ahead aggressively (a checkpoint load is
  // bound by this).
  ::madvise(m, size, MADV_SEQUENTIAL);

  try {
    uint64_t n = 0;
    for (size_t i = 0; i < st::kHeaderLengthBytes; ++i)
      n |= static_cast<uint64_t>(map_[i]) << (8 * i);
    if (n > size - st::kHeaderLengthBytes)
      throw corruption("header length " + std::to_string(n) + " runs past the end of the file (" +
                           std::to_string(size) + " bytes): truncated or not a safetensors file",
                       path);
    if (n > st::kMaxHeaderBytes)
      throw corruption("header length " + std::to_string(n) + " exceeds the format's limit of " +
                           std::to_string(st::kMaxHeaderBytes) + " bytes",
                       path);
    const std::string_view text(reinterpret_cast<const char*>(map_ + st::kHeaderLengthBytes), n);
    if (text.empty() || text[0] != '{')
      throw corruption("header does not start with '{': not a safetensors file", path);
    const JsonValue header = parse_json(text, path);
    if (!header.is_object()) throw corruption("header is not a JSON object", path);

    data_ = map_ + st::kHeaderLengthBytes + n;
    data_bytes_ = size - st::kHeaderLengthBytes - n;
    for (const auto& [key, value] : header.members) {
      if (key == st::kMetadataKey) {
        if (!value.is_object()) throw corruption("\"__metadata__\" is not an object", path);
        for (const auto& [mk, mv] : value.members) {
          if (!mv.is_string()) throw corruption("metadata \"" + mk + "\" is not a string", path);
          metadata_[mk] = mv.text;
        }
        continue;
      }
      entries_.push_back(parse_entry(key, value, path));
    }
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const auto& a, const auto& b) { return a.begin < b.begin; });
    uint64_t expect = 0;
    for (const auto& e : entries_) {
      if (e.end > data_bytes_)
        throw corruption(quoted(e.name) + ": data_offsets end " + std::to_string(e.end) +
                             " is past the data section (" + std::to_string(data_bytes_) +
                             " bytes)",
                         path);
      if (e.begin < expect)
        throw corruption(
            quoted(e.name) + ": data [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                ") overlaps the previous tensor's, which ends at " + std::to_string(expect),
            path);
      if (e.begin > expect)
        throw corruption(quoted(e.name) + ": data begins at " + std::to_string(e.begin) +
                             ", leaving a gap after offset " + std::to_string(expect),
                         path);
      expect = e.end;
    }
    if (expect != data_bytes_)
      throw corruption("the tensors cover " + std::to_string(expect) + " of the data section's " +
                           std::to_string(data_bytes_) + " bytes (trailing garbage)",
                       path);
    for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
  } catch (...) {
    unregister_mapped_input(map_);
    ::munmap(const_cast<std::byte*>(map_), map_bytes_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  unregister_mapped_input(map_);
  if (map_) ::munmap(const_cast<std::byte*>(map_), map_bytes_);
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw not_found("no " + quoted(name) + " in the file", path_);
  return entries_[it->second];
}

std::span<const std::byte> SafetensorsFile::raw(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  return {data_ + e.begin, static_cast<size_t>(e.end - e.begin)};
}

Tensor SafetensorsFile::read(const std::string& name, DType dtype) const {
  const SafetensorsEntry& e = entry(name);
  const std::byte* p = data_ + e.begin;
  const size_t n = static_cast<size_t>(shape_numel(e.shape));
  const auto unsupported_conversion = [&]() {
    return unsupported(quoted(name) + " is " + std::string(st::dtype_info(e.dtype).name) +
                           ", which does not convert to " + dtype_name(dtype),
                       path_);
  };
  Tensor out = Tensor::cpu(e.shape, dtype);
  if (dtype == DType::kF32 || dtype == DType::kF64) {
    if (!converts_to_float(e.dtype)) throw unsupported_conversion();
    if (dtype == DType::kF64) {
      double* o = out.data_as<double>();
      for (size_t i = 0; i < n; ++i) o[i] = element(e.dtype, p, i);
    } else {
      float* o = out.data_as<float>();
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<float>(element(e.dtype, p, i));
    }
  } else if (dtype == DType::kI32) {
    int32_t* o = out.data_as<int32_t>();
    if (e.dtype == st::DType::kI32) {
      std::memcpy(o, p, n * 4);
    } else if (e.dtype == st::DType::kI64) {
      for (size_t i = 0; i < n; ++i) {
        const int64_t v = load<int64_t>(p + 8 * i);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          throw invalid_argument(quoted(name) + " element " + std::to_string(i) + " = " +
                                     std::to_string(v) + " does not fit in int32",
                                 path_);
        o[i] = static_cast<int32_t>(v);
      }
    } else {
      throw unsupported_conversion();
    }
  } else {
    throw unsupported_conversion();
  }
  return out;
}

}  // namespace mtnlg
