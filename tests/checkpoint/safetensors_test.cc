#include "checkpoint/safetensors.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <functional>

#include "test_util.h"

namespace mtnlg {
namespace {

namespace st = safetensors;

// A file from a header text and data bytes; `length` overrides the 8-byte header length.
std::string raw_file(const std::string& header, const std::string& data, int64_t length = -1) {
  const uint64_t n = length >= 0 ? static_cast<uint64_t>(length) : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

// The Error `f` throws (fails the test if it throws none).
Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no mtnlg::Error thrown");
  return Error(Code::kInternal, "");
}

// Opening `bytes` as a file must fail with `code`, naming the file and each of `mentions`.
void expect_corrupt(const std::string& bytes, const std::vector<std::string>& mentions,
                    Code code = Code::kCorruption) {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  test::write_file(path, bytes);
  const Error e = error_of([&] { SafetensorsFile f(path); });
  INFO(e.what());
  CHECK(e.code() == code);
  CHECK(std::string(e.what()).find(path) != std::string::npos);
  for (const auto& m : mentions) CHECK(std::string(e.what()).find(m) != std::string::npos);
}

std::string floats(std::initializer_list<float> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * sizeof(float));
}

TEST_CASE("the format header's worked example is byte exact") {
  test::TempDir dir;
  const std::string path = dir.file("a.safetensors");
  SafetensorsWriter w(path);
  const float v[2] = {1.0f, 2.0f};
  w.add("a", st::DType::kF32, {2}, v, sizeof(v));
  w.commit();
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string expect = raw_file(header + "  ", floats({1.0f, 2.0f}));
  const std::string got = test::read_file(path);
  REQUIRE(got.size() == 72);
  CHECK(static_cast<unsigned char>(got[0]) == 0x38);
  CHECK(got == expect);
}

TEST_CASE("round trip of every dtype - scalars - empty tensors and metadata") {
  test::TempDir dir;
  const std::string path = dir.file("rt.safetensors");
  const double f64[3] = {1.5, -2.25, 1e-300};
  const int32_t i32[4] = {1, -2, 2147483647, -2147483647 - 1};
  const int64_t i64[2] = {-7, 123456789};
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};  // 1, -2, 2^-24, 65504
  const uint16_t bf16[2] = {0x3F80, 0xC0A0};                 // 1, -5
  const double scalar = 3.25;
  Tensor t = Tensor::cpu({2, 3}, DType::kF32);
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  {
    SafetensorsWriter w(path);
    w.add("f64", st::DType::kF64, {3}, f64, sizeof(f64));
    w.add("i32", st::DType::kI32, {2, 2}, i32, sizeof(i32));
    w.add("i64", st::DType::kI64, {2}, i64, sizeof(i64));
    w.add("f16", st::DType::kF16, {4}, f16, sizeof(f16));
    w.add("bf16", st::DType::kBF16, {2}, bf16, sizeof(bf16));
    w.add("scalar", st::DType::kF64, {}, &scalar, sizeof(scalar));
    w.add("empty", st::DType::kF32, {0, 3}, nullptr, 0);
    w.add("tensor", t);
    w.add_metadata("format", "pt");
    w.add_metadata("quote\"d", "line\nbreak");
    w.commit();
  }
  const SafetensorsFile f(path);
  CHECK(f.entries().size() == 8);
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("quote\"d") == "line\nbreak");
  CHECK(f.entry("i32").shape == Shape{2, 2});
  CHECK(f.entry("scalar").shape == Shape{});

  const Tensor a = f.read("f64", DType::kF64);
  CHECK(std::memcmp(a.data(), f64, sizeof(f64)) == 0);
  const Tensor b = f.read("i32", DType::kI32);
  CHECK(std::memcmp(b.data(), i32, sizeof(i32)) == 0);
  const Tensor c = f.read("i64", DType::kI32);
  CHECK(c.data_as<int32_t>()[0] == -7);
  CHECK(c.data_as<int32_t>()[1] == 123456789);
  const Tensor d = f.read("f16", DType::kF32);
  CHECK(d.data_as<float>()[0] == 1.0f);
  CHECK(d.data_as<float>()[1] == -2.0f);
  CHECK(d.data_as<float>()[2] == std::ldexp(1.0f, -24));
  CHECK(d.data_as<float>()[3] == 65504.0f);
  const Tensor e = f.read("bf16", DType::kF64);
  CHECK(e.data_as<double>()[0] == 1.0);
  CHECK(e.data_as<double>()[1] == -5.0);
  CHECK(f.read("scalar", DType::kF64).data_as<double>()[0] == 3.25);
  CHECK(f.read("empty", DType::kF32).numel() == 0);
  const Tensor g = f.read("tensor", DType::kF64);
  CHECK(g.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(g.data_as<double>()[i] == t.data_as<float>()[i]);
  CHECK(f.read("i32", DType::kF64).data_as<double>()[2] == 2147483647.0);
  CHECK(f.raw("f64").size() == sizeof(f64));
}

TEST_CASE("read errors name the tensor and the file") {
  test::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  const int64_t big[1] = {int64_t{1} << 40};
  const uint8_t u8[2] = {1, 2};
  {
    SafetensorsWriter w(path);
    w.add("big", st::DType::kI64, {1}, big, sizeof(big));
    w.add("bytes", st::DType::kU8, {2}, u8, sizeof(u8));
    w.add("flt", st::DType::kF32, {0}, nullptr, 0);
    w.commit();
  }
  const SafetensorsFile f(path);
  Error e = error_of([&] { f.read("missing", DType::kF32); });
  CHECK(e.code() == Code::kNotFound);
  CHECK(std::string(e.what()).find("'missing'") != std::string::npos);
  CHECK(std::string(e.what()).find(path) != std::string::npos);
  e = error_of([&] { f.read("big", DType::kI32); });
  CHECK(std::string(e.what()).find("'big'") != std::string::npos);
  e = error_of([&] { f.read("bytes", DType::kF32); });
  CHECK(e.code() == Code::kUnsupported);
  CHECK(std::string(e.what()).find("U8") != std::string::npos);
  e = error_of([&] { f.read("flt", DType::kI32); });
  CHECK(e.code() == Code::kUnsupported);
}

TEST_CASE("writer rejects bad input") {
  test::TempDir dir;
  SafetensorsWriter w(dir.file("w.safetensors"));
  const float v[2] = {1, 2};
  CHECK_THROWS_AS(w.add("a", st::DType::kF32, {3}, v, sizeof(v)), Error);
  w.add("a", st::DType::kF32, {2}, v, sizeof(v));
  CHECK_THROWS_AS(w.add("a", st::DType::kF32, {2}, v, sizeof(v)), Error);
  CHECK_THROWS_AS(w.add("__metadata__", st::DType::kF32, {2}, v, sizeof(v)), Error);
}

TEST_CASE("every kind of corrupt file is rejected with the file and tensor named") {
  const std::string data8 = floats({1.0f, 2.0f});
  const auto one = [](const std::string& offsets, const std::string& dtype = "F32",
                      const std::string& shape = "[2]") {
    return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" +
           offsets + "}}";
  };
  SECTION("shorter than the length field") {
    expect_corrupt("abc", {"too short"});
  }
  SECTION("header length past EOF") {
    expect_corrupt(raw_file(one("[0,8]"), data8, 1000), {"header length 1000", "past the end"});
  }
  SECTION("header length over the limit") {
    std::string bytes = raw_file(one("[0,8]"), data8);
    bytes[7] = 0x7f;
    expect_corrupt(bytes, {"past the end"});
  }
  SECTION("not an object") {
    expect_corrupt(raw_file("[1,2]", ""), {"does not start with '{'"});
  }
  SECTION("truncated JSON") {
    expect_corrupt(raw_file(R"({"t":{"dtype":)", ""), {"invalid JSON"});
  }
  SECTION("YAML that is not JSON") {
    expect_corrupt(raw_file("{t: {dtype: F32, shape: [2], data_offsets: [0, 8]}}", data8),
                   {"invalid JSON"});
  }
  SECTION("trailing comma") {
    expect_corrupt(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],}})", data8),
                   {"invalid JSON"});
  }
  SECTION("duplicate tensor") {
    expect_corrupt(raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            data8),
                   {"duplicate key \"t\""});
  }
  SECTION("text after the header object") {
    expect_corrupt(raw_file(one("[0,8]") + " x", data8), {"invalid JSON"});
  }
  SECTION("unknown dtype") {
    expect_corrupt(raw_file(one("[0,8]", "F33"), data8), {"'t'", "F33"});
  }
  SECTION("missing field") {
    expect_corrupt(raw_file(R"({"t":{"dtype":"F32","shape":[2]}})", data8),
                   {"'t'", "data_offsets"});
  }
  SECTION("negative shape") {
    expect_corrupt(raw_file(one("[0,8]", "F32", "[-2]"), data8), {"'t'"});
  }
  SECTION("fractional offset") {
    expect_corrupt(raw_file(one("[0,8.0]"), data8), {"'t'"});
  }
  SECTION("offsets reversed") {
    expect_corrupt(raw_file(one("[8,0]"), data8), {"'t'"});
  }
  SECTION("size != numel * itemsize") {
    expect_corrupt(raw_file(one("[0,8]", "F32", "[3]"), data8), {"'t'", "needs 12"});
  }
  SECTION("offsets out of range") {
    expect_corrupt(raw_file(one("[4,12]"), data8), {"'t'", "past the data section"});
  }
  SECTION("overlapping tensors") {
    expect_corrupt(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            data8),
                   {"'b'", "overlaps"});
  }
  SECTION("gap between tensors") {
    expect_corrupt(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
                            data8),
                   {"'b'", "gap"});
  }
  SECTION("trailing bytes") {
    expect_corrupt(raw_file(one("[0,8]"), data8 + "xx"), {"trailing"});
  }
  SECTION("metadata value not a string") {
    expect_corrupt(raw_file(R"({"__metadata__":{"k":1}})", ""), {"metadata \"k\""});
  }
  SECTION("a valid file still opens") {
    test::TempDir dir;
    test::write_file(dir.file("ok"), raw_file(one("[0,8]"), data8));
    CHECK(SafetensorsFile(dir.file("ok")).read("t", DType::kF32).data_as<float>()[1] == 2.0f);
  }
}

TEST_CASE("a missing file is not_found") {
  test::TempDir dir;
  const Error e = error_of([&] { SafetensorsFile f(dir.file("nope")); });
  CHECK(e.code() == Code::kNotFound);
}

size_t count_files(const std::filesystem::path& dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST_CASE("commit is atomic: no final file and no temp without commit") {
  test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const float v[2] = {1, 2};
  {
    SafetensorsWriter w(path);
    w.add("a", st::DType::kF32, {2}, v, sizeof(v));
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(count_files(dir.path()) == 0);

  // An existing file stays as it was until commit() replaces it whole.
  {
    SafetensorsWriter w(path);
    w.add("old", st::DType::kF32, {2}, v, sizeof(v));
    w.commit();
  }
  {
    SafetensorsWriter w(path);
    w.add("new", st::DType::kF32, {2}, v, sizeof(v));
    CHECK(SafetensorsFile(path).contains("old"));
    w.commit();
    CHECK_THROWS_AS(w.commit(), Error);
  }
  const SafetensorsFile f(path);
  CHECK(f.contains("new"));
  CHECK_FALSE(f.contains("old"));
  CHECK(count_files(dir.path()) == 1);

  // A commit that cannot create its temp file fails with an I/O error and leaves nothing.
  SafetensorsWriter w(dir.file("no/such/dir/x.safetensors"));
  w.add("a", st::DType::kF32, {2}, v, sizeof(v));
  const Error e = error_of([&] { w.commit(); });
  CHECK(e.code() == Code::kIOError);
  CHECK(count_files(dir.path()) == 1);
}

}  // namespace
}  // namespace mtnlg
