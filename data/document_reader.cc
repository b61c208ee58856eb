#include "data/document_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/input_file.h"
#include "core/status.h"

namespace mtnlg {

namespace {

bool is_blank(const std::string& line) {
  for (const char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\v' && c != '\f') return false;
  }
  return true;
}

}  // namespace

DocumentReader::DocumentReader(const std::string& path, InputFormat format)
    : path_(path), format_(format) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) {
    throw not_found(std::string("cannot read input: ") +
                        (S_ISDIR(st.st_mode) ? "is a directory" : std::strerror(errno)) +
                        "; the fix: pass an existing file to --input",
                    path);
  }
  // Opened without blocking and refused unless a regular file (a FIFO would block open()).
  InputFile input(path, "pass an existing file to --input");
  file_ = ::fdopen(input.fd(), "rb");
  if (file_ == nullptr)
    throw io_error(std::string("cannot open input: ") + std::strerror(errno), path);
  input.release();
  file_size_ = static_cast<int64_t>(st.st_size);
}

DocumentReader::~DocumentReader() {
  if (file_ != nullptr) std::fclose(file_);
  std::free(buffer_);
}

bool DocumentReader::read_line() {
  errno = 0;
  const ssize_t n = ::getline(&buffer_, &capacity_, file_);
  if (n < 0) {
    if (std::ferror(file_))
      throw io_error(std::string("read error: ") + std::strerror(errno), path_);
    return false;
  }
  line_.assign(buffer_, static_cast<size_t>(n));
  ++line_number_;
  return true;
}

bool DocumentReader::next(size_t target_bytes, DocumentChunk* chunk) {
  chunk->index = next_index_;
  chunk->records.clear();
  chunk->line_numbers.clear();
  chunk->bytes = 0;
  size_t record_bytes = 0;
  if (format_ == InputFormat::kJsonl) {
    while (record_bytes < target_bytes && read_line()) {
      chunk->bytes += static_cast<int64_t>(line_.size());
      if (is_blank(line_)) continue;
      if (line_.back() == '\n') line_.pop_back();
      record_bytes += line_.size();
      chunk->records.push_back(std::move(line_));
      chunk->line_numbers.push_back(line_number_);
    }
  } else {
    std::string doc;
    int64_t first_line = 0;
    while (true) {
      const bool got = read_line();
      if (got) chunk->bytes += static_cast<int64_t>(line_.size());
      if (!got || is_blank(line_)) {
        if (!doc.empty()) {
          record_bytes += doc.size();
          chunk->records.push_back(std::move(doc));
          chunk->line_numbers.push_back(first_line);
          doc.clear();
        }
        if (!got || record_bytes >= target_bytes) break;
        continue;
      }
      if (doc.empty()) first_line = line_number_;
      doc += line_;
    }
  }
  if (chunk->records.empty() && chunk->bytes == 0) return false;
  ++next_index_;
  return true;
}

}  // namespace mtnlg
