#include "data/curate/staged_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/status.h"

namespace mtnlg::curate {

StagedFile::StagedFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr)
    throw io_error(std::string("cannot create: ") + std::strerror(errno) +
                       "; the fix: check that the output directory exists and is writable",
                   tmp_);
}

StagedFile::~StagedFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void StagedFile::write(const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, file_) != n)
    throw io_error(std::string("write failed: ") + std::strerror(errno) + " (is the disk full?)",
                   tmp_);
}

void StagedFile::write_at(int64_t offset, const void* data, size_t n) {
  const long end = std::ftell(file_);
  if (std::fseek(file_, offset, SEEK_SET) != 0)
    throw io_error(std::string("seek failed: ") + std::strerror(errno), tmp_);
  write(data, n);
  std::fseek(file_, end, SEEK_SET);
}

void StagedFile::commit() {
  if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
    throw io_error(std::string("flush failed: ") + std::strerror(errno) + " (is the disk full?)",
                   tmp_);
  std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) throw io_error("cannot rename " + tmp_ + ": " + ec.message(), path_);
}

void write_whole_file(const std::string& path, std::string_view text) {
  StagedFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace mtnlg::curate
