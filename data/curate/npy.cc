#include "data/curate/npy.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/status.h"

namespace mtnlg::curate {

namespace {

constexpr size_t kHeaderBytes = 128;  // magic, version, length, dict: a multiple of 64

// The .npy v1.0 header for [rows, cols] '<u4', padded to kHeaderBytes.
std::string npy_header(int64_t rows, int64_t cols) {
  std::string dict = "{'descr': '<u4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  const size_t prefix = 10;  // \x93NUMPY, 2 version bytes, 2 length bytes
  dict.append(kHeaderBytes - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string h = "\x93NUMPY";
  h.push_back('\x01');
  h.push_back('\x00');
  const auto len = static_cast<uint16_t>(dict.size());
  h.push_back(static_cast<char>(len & 0xff));
  h.push_back(static_cast<char>(len >> 8));
  return h + dict;
}

}  // namespace

NpyU32Writer::NpyU32Writer(std::string path, int64_t cols) : file_(std::move(path)), cols_(cols) {
  const std::string h = npy_header(0, cols_);
  file_.write(h.data(), h.size());
}

void NpyU32Writer::append(const uint32_t* data, int64_t rows) {
  static_assert(std::endian::native == std::endian::little, "the .npy is written little-endian");
  file_.write(data, static_cast<size_t>(rows * cols_) * sizeof(uint32_t));
  rows_ += rows;
}

void NpyU32Writer::commit() {
  const std::string h = npy_header(rows_, cols_);
  file_.write_at(0, h.data(), h.size());
  file_.commit();
}

NpyU32 read_npy_u32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw not_found("cannot open the signature file", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bad = [&](const std::string& why) {
    return corruption("not a uint32 [documents, num_perm] .npy: " + why +
                          "; the fix: rerun mtnlg-curate dedup minhash for it",
                      path);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("no .npy magic");
  const size_t len = static_cast<unsigned char>(bytes[8]) |
                     static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  if (bytes[6] != 1 || 10 + len > bytes.size()) throw bad("unsupported version or short header");
  const std::string dict = bytes.substr(10, len);
  if (dict.find("'descr': '<u4'") == std::string::npos) throw bad("dtype is not '<u4'");
  if (dict.find("'fortran_order': False") == std::string::npos) throw bad("Fortran order");
  const size_t shape = dict.find("'shape': (");
  if (shape == std::string::npos) throw bad("no shape");
  NpyU32 out;
  char* end = nullptr;
  const char* p = dict.c_str() + shape + 10;
  out.rows = std::strtoll(p, &end, 10);
  if (end == p || *end != ',') throw bad("shape is not 2-D");
  p = end + 1;
  out.cols = std::strtoll(p, &end, 10);
  if (end == p || *end != ')') throw bad("shape is not 2-D");
  const size_t want = static_cast<size_t>(out.rows * out.cols) * sizeof(uint32_t);
  if (bytes.size() - 10 - len != want)
    throw bad(std::to_string(bytes.size() - 10 - len) + " data bytes for shape (" +
              std::to_string(out.rows) + ", " + std::to_string(out.cols) + "): truncated");
  out.data.resize(static_cast<size_t>(out.rows * out.cols));
  std::memcpy(out.data.data(), bytes.data() + 10 + len, want);
  return out;
}

}  // namespace mtnlg::curate
