#include "data/index_cache.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "core/status.h"

namespace mtnlg {

namespace {

constexpr char kArrayMagic[8] = {'M', 'T', 'N', 'L', 'G', 'I', 'X', '1'};
constexpr size_t kArrayHeaderBytes = 32;

// The header's type code: 0 is a signed integer of the header's width (the only kind before
// unsigned and 16-bit arrays; still read), else 1 int16, 2 int32, 3 uint32, 4 int64.
uint32_t type_code(IndexType type) {
  return static_cast<uint32_t>(type) + 1;
}
std::optional<IndexType> type_of(uint32_t width, uint32_t code) {
  if (code == 0) {
    if (width == 4) return IndexType::kInt32;
    if (width == 8) return IndexType::kInt64;
    return std::nullopt;
  }
  if (code > 4) return std::nullopt;
  const auto type = static_cast<IndexType>(code - 1);
  if (static_cast<uint32_t>(index_type_width(type)) != width) return std::nullopt;
  return type;
}
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string fix_text(const std::string& dir) {
  return "; the fix: delete the cache directory " + dir +
         " (data.cache_dir); the indices are rebuilt on the next start";
}

// Writes the pieces to a temporary file beside `path`, syncs it and renames it into place.
void write_atomically(const std::string& path,
                      std::initializer_list<std::span<const uint8_t>> parts) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) {
    throw io_error(std::string("cannot create: ") + std::strerror(errno) +
                       "; the fix: make data.cache_dir a writable directory",
                   tmp);
  }
  bool ok = true;
  for (const auto& part : parts) {
    ok = ok && (part.empty() || std::fwrite(part.data(), 1, part.size(), f.get()) == part.size());
  }
  ok = ok && std::fflush(f.get()) == 0 && ::fsync(::fileno(f.get())) == 0;
  const int err = errno;
  ok = std::fclose(f.release()) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw io_error(std::string("cannot write: ") + std::strerror(err) + " (disk full?)", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rerr = errno;
    std::remove(tmp.c_str());
    throw io_error("cannot rename " + tmp + " into place: " + std::strerror(rerr), path);
  }
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

uint64_t hash64(std::span<const uint8_t> bytes, uint64_t h) {
  const size_t n = bytes.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + i, n - i);
    h = (h ^ w) * kFnvPrime;
  }
  return (h ^ static_cast<uint64_t>(n)) * kFnvPrime;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void JsonText::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += '"';
  body_ += escape(k);
  body_ += "\": ";
}
JsonText& JsonText::add(const std::string& k, const std::string& value) {
  key(k);
  body_ += '"';
  body_ += escape(value);
  body_ += '"';
  return *this;
}
JsonText& JsonText::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}
JsonText& JsonText::add(const std::string& k, uint64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}
JsonText& JsonText::add(const std::string& k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}
std::string json_double(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

JsonText& JsonText::add(const std::string& k, double value) {
  key(k);
  body_ += json_double(value);
  return *this;
}
JsonText& JsonText::add_raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

IndexCache::IndexCache(std::string dir, std::string kind, std::string description)
    : dir_(std::move(dir)), kind_(std::move(kind)), description_(std::move(description)) {
  const auto* p = reinterpret_cast<const uint8_t*>(description_.data());
  stem_ = (std::filesystem::path(dir_) / (hex64(hash64({p, description_.size()})) + "-" + kind_))
              .string();
}

std::string IndexCache::path(const std::string& array) const {
  return stem_ + "-" + array + ".bin";
}
std::string IndexCache::description_path() const {
  return stem_ + "-description.json";
}

bool IndexCache::present() const {
  if (dir_.empty()) return false;
  const std::string path = description_path();
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return false;
  std::string text;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, got);
  if (text != description_) {
    throw corruption(
        "the cached indices were built for\n  " + text + "\nbut this run needs\n  " + description_ +
            "\n(a hash collision, or a cache written by another version)" + fix_text(dir_),
        path);
  }
  return true;
}

IndexArray IndexCache::load(const std::string& array, int64_t expected_size) const {
  const std::string p = path(array);
  File f(std::fopen(p.c_str(), "rb"));
  if (!f) throw corruption("missing array of a cached index (a partial copy?)" + fix_text(dir_), p);
  uint8_t header[kArrayHeaderBytes];
  uint32_t width = 0, code = 0;
  uint64_t count = 0, checksum = 0;
  const bool header_ok = std::fread(header, 1, sizeof header, f.get()) == sizeof header &&
                         std::memcmp(header, kArrayMagic, 8) == 0;
  if (header_ok) {
    std::memcpy(&width, header + 8, 4);
    std::memcpy(&code, header + 12, 4);
    std::memcpy(&count, header + 16, 8);
    std::memcpy(&checksum, header + 24, 8);
  }
  const std::optional<IndexType> type = header_ok ? type_of(width, code) : std::nullopt;
  if (!type) throw corruption("not an index array (bad header)" + fix_text(dir_), p);
  if (count != static_cast<uint64_t>(expected_size)) {
    throw corruption("holds " + std::to_string(count) + " values where " +
                         std::to_string(expected_size) + " are expected" + fix_text(dir_),
                     p);
  }
  IndexArray values(expected_size, *type);
  const size_t bytes = values.bytes();
  const bool read_ok = (bytes == 0 || std::fread(values.data(), 1, bytes, f.get()) == bytes) &&
                       std::fgetc(f.get()) == EOF;
  if (!read_ok) throw corruption("wrong size (truncated or appended to)" + fix_text(dir_), p);
  if (hash64({static_cast<const uint8_t*>(values.data()), bytes}) != checksum) {
    throw corruption("checksum mismatch (the file was corrupted)" + fix_text(dir_), p);
  }
  return values;
}

void IndexCache::store(const std::string& array, const IndexArray& values) const {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    throw io_error("cannot create the cache directory " + dir_ + ": " + ec.message() +
                       "; the fix: set data.cache_dir to a writable directory",
                   "data.cache_dir");
  }
  uint8_t header[kArrayHeaderBytes] = {};
  const uint32_t width = static_cast<uint32_t>(values.width());
  const uint32_t code = type_code(values.type());
  const uint64_t count = static_cast<uint64_t>(values.size());
  const auto* data = static_cast<const uint8_t*>(values.data());
  const uint64_t checksum = hash64({data, values.bytes()});
  std::memcpy(header, kArrayMagic, 8);
  std::memcpy(header + 8, &width, 4);
  std::memcpy(header + 12, &code, 4);
  std::memcpy(header + 16, &count, 8);
  std::memcpy(header + 24, &checksum, 8);
  write_atomically(path(array), {{header, sizeof header}, {data, values.bytes()}});
}

void IndexCache::commit() const {
  if (dir_.empty()) return;
  const auto* p = reinterpret_cast<const uint8_t*>(description_.data());
  write_atomically(description_path(), {{p, description_.size()}});
}

}  // namespace mtnlg
