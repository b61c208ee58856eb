#include "data/curate/line_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/status.h"

namespace mtnlg::curate {

namespace {

constexpr size_t kChunk = size_t{1} << 20;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Compression compression_of(std::string_view path) {
  if (ends_with(path, ".gz")) return Compression::kGzip;
  if (ends_with(path, ".zst")) return Compression::kZstd;
  return Compression::kNone;
}

// The file and its decompressor: read(out) appends decompressed bytes, false at a clean end.
struct LineReader::Source {
  std::FILE* file = nullptr;
  Compression compression = Compression::kNone;
  std::vector<char> in;  // compressed bytes read, from in_pos to in_len
  size_t in_pos = 0, in_len = 0;
  bool eof = false;      // the file has no more bytes
  int64_t consumed = 0;  // compressed bytes read from the file
  z_stream zs{};
  bool zs_open = false;
  bool gz_member_done = true;  // between gzip members (or before the first)
  ZSTD_DStream* zd = nullptr;
  size_t zstd_hint = 0;  // ZSTD_decompressStream's last return: 0 at a frame's end

  ~Source() {
    if (zs_open) inflateEnd(&zs);
    if (zd != nullptr) ZSTD_freeDStream(zd);
    if (file != nullptr) std::fclose(file);
  }

  // More compressed input when in[] is used up; false at the end of the file.
  bool refill(const std::string& path) {
    if (in_pos < in_len) return true;
    if (eof) return false;
    in.resize(kChunk);
    in_len = std::fread(in.data(), 1, in.size(), file);
    in_pos = 0;
    consumed += static_cast<int64_t>(in_len);
    if (in_len < in.size()) {
      if (std::ferror(file))
        throw io_error(std::string("read failed: ") + std::strerror(errno), path);
      eof = true;
    }
    return in_len > 0;
  }
};

LineReader::LineReader(const std::string& path) : path_(path), source_(std::make_unique<Source>()) {
  source_->file = std::fopen(path.c_str(), "rb");
  if (source_->file == nullptr)
    throw not_found(std::string("cannot open: ") + std::strerror(errno) +
                        "; the fix: check the path (a shard's .jsonl, .jsonl.gz or .jsonl.zst)",
                    path);
  if (std::fseek(source_->file, 0, SEEK_END) == 0) {
    file_size_ = std::ftell(source_->file);
    std::fseek(source_->file, 0, SEEK_SET);
  }
  source_->compression = compression_of(path);
  if (source_->compression == Compression::kZstd) {
    source_->zd = ZSTD_createDStream();
    if (source_->zd == nullptr) throw io_error("cannot create a zstd stream", path);
    ZSTD_initDStream(source_->zd);
  }
}

LineReader::~LineReader() = default;

int64_t LineReader::bytes_read() const {
  return source_->consumed - static_cast<int64_t>(source_->in_len - source_->in_pos);
}

bool LineReader::fill() {
  Source& s = *source_;
  const auto where = [&] { return " after line " + std::to_string(line_number_); };
  std::vector<char> out(kChunk);
  while (true) {
    if (s.compression == Compression::kNone) {
      if (!s.refill(path_)) return false;
      buf_.append(s.in.data() + s.in_pos, s.in_len - s.in_pos);
      s.in_pos = s.in_len;
      return true;
    }
    if (!s.refill(path_)) {
      // The file ended: cleanly only between gzip members or zstd frames.
      if (s.compression == Compression::kGzip && !s.gz_member_done)
        throw corruption("the gzip stream is truncated" + where() +
                             "; the fix: re-copy or re-compress the shard",
                         path_);
      if (s.consumed == 0)
        throw corruption("the file is empty, not a compressed stream" + where() +
                             "; the fix: remove it or write its documents (an empty shard is an "
                             "empty .jsonl)",
                         path_);
      if (s.compression == Compression::kZstd && s.zstd_hint != 0)
        throw corruption("the zstd stream is truncated" + where() +
                             "; the fix: re-copy or re-compress the shard",
                         path_);
      return false;
    }
    size_t produced = 0;
    if (s.compression == Compression::kGzip) {
      if (s.gz_member_done) {
        if (s.zs_open) inflateEnd(&s.zs);
        s.zs = z_stream{};
        if (inflateInit2(&s.zs, 15 + 16) != Z_OK) throw io_error("cannot start inflate", path_);
        s.zs_open = true;
        s.gz_member_done = false;
      }
      s.zs.next_in = reinterpret_cast<Bytef*>(s.in.data() + s.in_pos);
      s.zs.avail_in = static_cast<uInt>(s.in_len - s.in_pos);
      s.zs.next_out = reinterpret_cast<Bytef*>(out.data());
      s.zs.avail_out = static_cast<uInt>(out.size());
      const int rc = inflate(&s.zs, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        throw corruption(std::string("corrupt gzip data (") + (s.zs.msg ? s.zs.msg : "zlib error") +
                             ")" + where() + "; the fix: re-copy or re-compress the shard",
                         path_);
      s.in_pos = s.in_len - s.zs.avail_in;
      produced = out.size() - s.zs.avail_out;
      if (rc == Z_STREAM_END) s.gz_member_done = true;
    } else {
      ZSTD_inBuffer in{s.in.data() + s.in_pos, s.in_len - s.in_pos, 0};
      ZSTD_outBuffer o{out.data(), out.size(), 0};
      const size_t rc = ZSTD_decompressStream(s.zd, &o, &in);
      if (ZSTD_isError(rc))
        throw corruption(std::string("corrupt zstd data (") + ZSTD_getErrorName(rc) + ")" +
                             where() + "; the fix: re-copy or re-compress the shard",
                         path_);
      s.zstd_hint = rc;
      s.in_pos += in.pos;
      produced = o.pos;
    }
    if (produced > 0) {
      buf_.append(out.data(), produced);
      return true;
    }
  }
}

bool LineReader::read_exact(size_t n, std::string* out) {
  out->clear();
  while (buf_.size() - pos_ < n) {
    buf_.erase(0, pos_);
    pos_ = 0;
    if (!fill()) break;
  }
  const size_t take = std::min(n, buf_.size() - pos_);
  out->assign(buf_, pos_, take);
  pos_ += take;
  for (const char c : *out) line_number_ += c == '\n';
  return take == n;
}

bool LineReader::next(std::string* line) {
  size_t scan = pos_;  // where the search for '\n' goes on (a long line is scanned once)
  while (true) {
    const size_t nl = buf_.find('\n', scan);
    if (nl != std::string::npos) {
      line->assign(buf_, pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    // Keep the unfinished line, drop what was returned, and read more.
    buf_.erase(0, pos_);
    scan = buf_.size();
    pos_ = 0;
    if (!fill()) {
      if (buf_.empty()) return false;
      line->assign(buf_);  // the last line, without its '\n'
      buf_.clear();
      break;
    }
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_number_;
  return true;
}

}  // namespace mtnlg::curate
