#include "core/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/status.h"

namespace mtnlg {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Protocol buffer wire format: varints, keys (field << 3 | wire type), fixed 32/64-bit.
void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void put_key(std::string* out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}
template <typename T>
void put_fixed(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian, as x86-64 and the wire format both are
  out->append(b, sizeof(T));
}
void put_bytes(std::string* out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out->append(bytes);
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t c = crc32c(data, bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tensorboard_scalar_event(double wall_time, int64_t step, std::string_view tag,
                                     float value) {
  std::string v;
  put_bytes(&v, 1, tag);
  put_key(&v, 2, 5);  // fixed32
  put_fixed(&v, value);
  std::string summary;
  put_bytes(&summary, 1, v);
  std::string event;
  put_key(&event, 1, 1);  // fixed64
  put_fixed(&event, wall_time);
  put_key(&event, 2, 0);
  put_varint(&event, static_cast<uint64_t>(step));  // int64: two's complement as a varint
  put_bytes(&event, 5, summary);
  return event;
}

std::string tensorboard_version_event(double wall_time) {
  std::string event;
  put_key(&event, 1, 1);
  put_fixed(&event, wall_time);
  put_bytes(&event, 3, "brain.Event:2");
  return event;
}

std::string tfrecord(std::string_view record) {
  std::string out;
  const uint64_t length = record.size();
  put_fixed(&out, length);
  put_fixed(&out, masked_crc32c(out.data(), 8));
  out.append(record);
  put_fixed(&out, masked_crc32c(record.data(), record.size()));
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw io_error("cannot create logging.tensorboard_dir: " + ec.message(), dir);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double t = now_seconds();
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + "." + host + "." +
            std::to_string(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr)
    throw io_error(std::string("cannot create: ") + std::strerror(errno), path_);
  write(tfrecord(tensorboard_version_event(t)));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw io_error(std::string("cannot write (is the disk full?): ") + std::strerror(errno), path_);
}

void TensorBoardWriter::scalar(std::string_view tag, double value, int64_t step) {
  write(tfrecord(tensorboard_scalar_event(now_seconds(), step, tag, static_cast<float>(value))));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    throw io_error(std::string("cannot write (is the disk full?): ") + std::strerror(errno), path_);
}

}  // namespace mtnlg
