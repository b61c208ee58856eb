// Reading shards (data/curate/line_reader.h, text_records.h) and writing signature files
// (npy.h): plain, gzip and zstd read alike; a truncated or corrupt file, a record without its
// text, invalid UTF-8 and a truncated .npy are errors naming the file and line, or skipped and
// counted when asked.
#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/curate/line_reader.h"
#include "data/curate/npy.h"
#include "data/curate/spill_file.h"
#include "data/curate/text_records.h"
#include "test_util.h"

using namespace mtnlg;
using namespace mtnlg::curate;

namespace {

std::string gzip(const std::string& data) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string zstd(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::vector<std::string> lines_of(const std::string& path) {
  LineReader r(path);
  std::vector<std::string> out;
  std::string line;
  while (r.next(&line)) out.push_back(line);
  return out;
}

// A body long enough to span several of the reader's 1 MiB windows.
std::string big_body() {
  std::string s;
  for (int i = 0; i < 60000; ++i)
    s += "{\"id\": " + std::to_string(i) + ", \"text\": \"line " + std::to_string(i) + " " +
         std::string(static_cast<size_t>(i % 37), 'x') + "\"}\n";
  return s;
}

}  // namespace

TEST_CASE(
    "plain, gzip and zstd shards give the same lines - CRLF and a last line without newline") {
  test::TempDir dir;
  const std::string body = big_body() + "{\"text\": \"crlf\"}\r\nlast";
  test::write_file(dir.file("a.jsonl"), body);
  test::write_file(dir.file("a.jsonl.gz"), gzip(body));
  test::write_file(dir.file("a.jsonl.zst"), zstd(body));
  // Two gzip members, as `cat a.gz b.gz` makes.
  test::write_file(dir.file("two.jsonl.gz"), gzip(body.substr(0, 1000)) + gzip(body.substr(1000)));
  const auto plain = lines_of(dir.file("a.jsonl"));
  REQUIRE(plain.size() == 60002);
  CHECK(plain[60000] == "{\"text\": \"crlf\"}");
  CHECK(plain.back() == "last");
  CHECK(lines_of(dir.file("a.jsonl.gz")) == plain);
  CHECK(lines_of(dir.file("a.jsonl.zst")) == plain);
  CHECK(lines_of(dir.file("two.jsonl.gz")) == plain);
  test::write_file(dir.file("empty.jsonl"), "");
  CHECK(lines_of(dir.file("empty.jsonl")).empty());
}

TEST_CASE("a truncated or corrupt compressed shard is an error naming the file and the line") {
  test::TempDir dir;
  const std::string body = big_body();
  const std::string gz = gzip(body), zs = zstd(body);
  test::write_file(dir.file("cut.jsonl.gz"), gz.substr(0, gz.size() / 2));
  test::write_file(dir.file("cut.jsonl.zst"), zs.substr(0, zs.size() / 2));
  std::string bad = gz;
  bad[bad.size() / 2] ^= 0x55;
  bad[bad.size() / 2 + 1] ^= 0x55;
  test::write_file(dir.file("bad.jsonl.gz"), bad);
  test::write_file(dir.file("empty.jsonl.gz"), "");
  for (const char* name : {"cut.jsonl.gz", "cut.jsonl.zst", "bad.jsonl.gz", "empty.jsonl.gz"}) {
    INFO(name);
    try {
      lines_of(dir.file(name));
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kCorruption);
      CHECK(e.context() == dir.file(name));
      CHECK_THAT(e.message(), Catch::Contains("after line"));
    }
  }
  CHECK_THROWS_AS(LineReader(dir.file("missing.jsonl")), Error);
}

TEST_CASE("records: the text key's string - bad records named by file and line, or skipped") {
  test::TempDir dir;
  const std::string path = dir.file("r.jsonl");
  test::write_file(path,
                   "{\"text\": \"one\", \"url\": \"u\"}\n"
                   "\n"
                   "{\"url\": \"no text\"}\n"
                   "{\"text\": 5}\n"
                   "not json\n"
                   "{\"text\": \"bad \xff utf8\"}\n"
                   "{\"content\": \"x\", \"text\": \"two\"}\n");
  {
    TextRecords r(path, "text", BadRecords::kError);
    std::vector<TextRecord> batch;
    try {
      r.next_batch(&batch, 1 << 20);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kInvalidArgument);  // a bad input record: exit status 2
      CHECK(e.context() == path + ":3");
      CHECK_THAT(e.message(), Catch::Contains("no text key") && Catch::Contains("--text-key"));
    }
  }
  TextRecords r(path, "text", BadRecords::kSkip);
  std::vector<TextRecord> batch;
  REQUIRE(r.next_batch(&batch, 1 << 20));
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].text == "one");
  CHECK(batch[0].line == 1);
  CHECK(batch[0].raw == "{\"text\": \"one\", \"url\": \"u\"}");
  CHECK(batch[1].text == "two");
  CHECK(batch[1].line == 7);
  CHECK(r.skipped() ==
        std::map<std::string, int64_t>{
            {"invalid UTF-8", 1}, {"no text key", 1}, {"not JSON", 1}, {"text not a string", 1}});
  CHECK_FALSE(r.next_batch(&batch, 1 << 20));
  // Another key holds the text.
  TextRecords c(path, "content", BadRecords::kSkip);
  REQUIRE(c.next_batch(&batch, 1 << 20));
  CHECK(batch.size() == 1);
  CHECK(batch[0].text == "x");
}

TEST_CASE("npy: written whole or not at all - read back as numpy lays it out") {
  test::TempDir dir;
  const std::string path = dir.file("s.npy");
  {
    NpyU32Writer w(path, 3);
    const uint32_t rows[6] = {1, 2, 3, 4, 5, 0xFFFFFFFFu};
    w.append(rows, 2);
    // Not committed: nothing under the final name, no temporary left.
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  {
    NpyU32Writer w(path, 3);
    const uint32_t rows[6] = {1, 2, 3, 4, 5, 0xFFFFFFFFu};
    w.append(rows, 2);
    w.commit();
  }
  const NpyU32 n = read_npy_u32(path);
  CHECK(n.rows == 2);
  CHECK(n.cols == 3);
  CHECK(n.data == std::vector<uint32_t>{1, 2, 3, 4, 5, 0xFFFFFFFFu});
  const std::string bytes = test::read_file(path);
  CHECK(bytes.size() == 128 + 24);  // the header is 128 bytes, a multiple of 64 as numpy aligns
  test::write_file(dir.file("cut.npy"), bytes.substr(0, bytes.size() - 4));
  CHECK_THROWS_WITH(read_npy_u32(dir.file("cut.npy")), Catch::Contains("truncated"));
}

TEST_CASE("spill file: records read back by offset, across its buffer, and nothing left on disk") {
  test::TempDir dir;
  {
    SpillFile spill(dir.path().string());
    std::vector<std::pair<uint64_t, std::string>> written;
    for (int i = 0; i < 200; ++i) {
      // Records of 0 bytes to past the 1 MB write buffer.
      const std::string r(
          static_cast<size_t>(i % 7 == 0 ? 0 : (i * 7919) % 40000 + (i == 100 ? 1 << 21 : 0)),
          static_cast<char>('a' + i % 26));
      written.emplace_back(spill.append(r), r);
    }
    spill.flush();
    CHECK(std::filesystem::is_empty(dir.path()));  // unnamed from the start
    std::string back;
    for (auto it = written.rbegin(); it != written.rend(); ++it) {
      spill.read(it->first, &back);
      REQUIRE(back == it->second);
    }
  }
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK_THROWS_WITH(SpillFile(dir.file("no/such/dir")),
                    Catch::Contains("no/such/dir") && Catch::Contains("--work-dir"));
}
