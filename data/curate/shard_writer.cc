#include "data/curate/shard_writer.h"

#include <zlib.h>
#include <zstd.h>

#include <vector>

#include "core/status.h"

namespace mtnlg::curate {

namespace {
constexpr size_t kPending = size_t{1} << 20;
}  // namespace

struct ShardWriter::Codec {
  Compression kind = Compression::kNone;
  z_stream zs{};
  bool zs_open = false;
  ZSTD_CCtx* zc = nullptr;
  std::vector<char> out = std::vector<char>(size_t{1} << 20);
  ~Codec() {
    if (zs_open) deflateEnd(&zs);
    if (zc != nullptr) ZSTD_freeCCtx(zc);
  }
};

ShardWriter::ShardWriter(std::string path) : file_(path), codec_(std::make_unique<Codec>()) {
  codec_->kind = compression_of(path);
  if (codec_->kind == Compression::kGzip) {
    // gzip wrapper (15 + 16), level 6 as gzip's default; no name or time in the header.
    if (deflateInit2(&codec_->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw io_error("cannot start deflate", file_.temp_path());
    codec_->zs_open = true;
  } else if (codec_->kind == Compression::kZstd) {
    codec_->zc = ZSTD_createCCtx();
    if (codec_->zc == nullptr) throw io_error("cannot create a zstd context", file_.temp_path());
    ZSTD_CCtx_setParameter(codec_->zc, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(codec_->zc, ZSTD_c_checksumFlag, 1);
  }
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::compress(const void* data, size_t n, bool finish) {
  Codec& c = *codec_;
  if (c.kind == Compression::kNone) {
    file_.write(data, n);
    return;
  }
  if (c.kind == Compression::kGzip) {
    c.zs.next_in = static_cast<Bytef*>(const_cast<void*>(data));
    c.zs.avail_in = static_cast<uInt>(n);
    int rc;
    do {
      c.zs.next_out = reinterpret_cast<Bytef*>(c.out.data());
      c.zs.avail_out = static_cast<uInt>(c.out.size());
      rc = deflate(&c.zs, finish ? Z_FINISH : Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR) throw io_error("deflate failed", file_.temp_path());
      file_.write(c.out.data(), c.out.size() - c.zs.avail_out);
    } while (c.zs.avail_out == 0 || (finish && rc != Z_STREAM_END));
    return;
  }
  ZSTD_inBuffer in{data, n, 0};
  while (true) {
    ZSTD_outBuffer o{c.out.data(), c.out.size(), 0};
    const size_t left = ZSTD_compressStream2(c.zc, &o, &in, finish ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left))
      throw io_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(left),
                     file_.temp_path());
    file_.write(c.out.data(), o.pos);
    if (finish ? left == 0 : in.pos == in.size) break;
  }
}

void ShardWriter::write_line(std::string_view line) {
  pending_.append(line);
  pending_.push_back('\n');
  ++lines_;
  if (pending_.size() >= kPending) {
    compress(pending_.data(), pending_.size(), false);
    pending_.clear();
  }
}

void ShardWriter::commit() {
  compress(pending_.data(), pending_.size(), true);
  pending_.clear();
  file_.commit();
}

}  // namespace mtnlg::curate
