// TensorBoard event files (core/tensorboard.h): CRC-32C against published vectors, the TFRecord
// framing, and the Event encoding byte for byte as the protocol buffer wire format lays it out.
// tests/cmd/tensorboard_test.sh decodes a training run's file in Python, independently.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <string>

#include "core/status.h"
#include "core/tensorboard.h"
#include "test_util.h"

using namespace mtnlg;

TEST_CASE("CRC-32C is Castagnoli's - the published check values") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the catalogue's check value
  const std::string zeros(32, '\0'), ones(32, '\xff');
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);  // RFC 3720, B.4
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[static_cast<size_t>(i)] = static_cast<char>(i);
  CHECK(crc32c(inc.data(), inc.size()) == 0x46DD794Eu);
  CHECK(crc32c("", 0) == 0u);
  const uint32_t c = crc32c("123456789", 9);
  CHECK(masked_crc32c("123456789", 9) == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("a TFRecord is length, its masked CRC, the record, its masked CRC") {
  const std::string r = tfrecord("abc");
  REQUIRE(r.size() == 8 + 4 + 3 + 4);
  uint64_t len = 0;
  uint32_t len_crc = 0, data_crc = 0;
  std::memcpy(&len, r.data(), 8);
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 15, 4);
  CHECK(len == 3);
  CHECK(len_crc == masked_crc32c(r.data(), 8));
  CHECK(r.substr(12, 3) == "abc");
  CHECK(data_crc == masked_crc32c("abc", 3));
}

TEST_CASE("a scalar Event in the protocol buffer wire format") {
  const std::string e = tensorboard_scalar_event(1.5, 300, "lm loss", 2.0f);
  // wall_time: field 1, fixed64 (key 0x09), 1.5 as a little-endian double.
  std::string want = "\x09";
  const double w = 1.5;
  want.append(reinterpret_cast<const char*>(&w), 8);
  // step: field 2, varint (key 0x10), 300 = 0xAC 0x02.
  want += "\x10\xac\x02";
  // summary: field 5, bytes (0x2a), length 16: value (field 1, 0x0a) of 14 bytes: tag (0x0a,
  // 7, "lm loss") and simple_value (field 2, fixed32: 0x15, 2.0f = 00 00 00 40).
  want += std::string("\x2a\x10\x0a\x0e\x0a\x07", 6) + "lm loss" +
          std::string("\x15\x00\x00\x00\x40", 5);
  CHECK(e == want);
  const std::string v = tensorboard_version_event(0.0);
  CHECK(v == std::string("\x09\x00\x00\x00\x00\x00\x00\x00\x00\x1a\x0d", 11) + "brain.Event:2");
}

TEST_CASE("the writer makes an events.out.tfevents file that starts with the version record") {
  test::TempDir d;
  std::string path;
  {
    TensorBoardWriter w(d.file("tb/run"));
    path = w.path();
    w.scalar("lm loss", 3.25, 1);
    w.flush();
  }
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  const std::string bytes = test::read_file(path);
  uint64_t first = 0;
  std::memcpy(&first, bytes.data(), 8);
  CHECK(bytes.substr(12 + first - 13, 13) == "brain.Event:2");
  CHECK(bytes.size() > 12 + first + 4 + 12);
  test::write_file(d.file("a-file"), "x");
  CHECK_THROWS_AS(TensorBoardWriter(d.file("a-file/tb")), Error);
}
