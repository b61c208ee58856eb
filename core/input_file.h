// Inputs opened for reading without ever blocking on them. A FIFO (or a device) given where a
// file belongs would block open() until a writer comes, forever: every program opens its inputs
// here, with O_NONBLOCK, and refuses anything but a regular file before reading a byte (then the
// descriptor is made blocking again). One mechanism for every input: recipes, datasets, token
// files, safetensors, checkpoint manifests and shards.
#pragma once

#include <cstdint>
#include <string>

namespace mtnlg {

class InputFile {
 public:
  // Throws not_found "no such file[: missing_fix]" (ENOENT), io_error "not a regular file" (a
  // FIFO, socket, device or directory: what it is) or io_error with strerror, naming `path`.
  explicit InputFile(const std::string& path, const std::string& missing_fix = "");
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The descriptor, now the caller's to close.
  int release();
  // The rest of the file (from the current offset), read to its end.
  std::string read_all();

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// A whole (small) input file: InputFile(path, missing_fix).read_all().
std::string read_input_file(const std::string& path, const std::string& missing_fix = "");

}  // namespace mtnlg
