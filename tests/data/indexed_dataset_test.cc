// Tests for data/indexed_dataset.h and data/indexed_dataset_builder.h: round trips, the bytes of
// the format's worked example, every validation error on crafted files, atomic commit.
#include "data/indexed_dataset.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

namespace mtnlg {
namespace {

namespace fs = std::filesystem;

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// An .idx file's bytes, built field by field so that tests can break any one of them.
struct IdxSpec {
  std::string magic{"MMIDIDX\0\0", 9};
  uint64_t version = 1;
  uint8_t code = 8;
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  std::vector<int64_t> docs;

  std::string bytes() const {
    std::string s = magic;
    put<uint64_t>(s, version);
    put<uint8_t>(s, code);
    put<uint64_t>(s, lengths.size());
    put<uint64_t>(s, docs.size());
    for (int32_t v : lengths) put(s, v);
    for (int64_t v : pointers) put(s, v);
    for (int64_t v : docs) put(s, v);
    return s;
  }
};

// A valid uint16 dataset of two documents [1 2 3] [4 5], as a spec plus its .bin bytes.
IdxSpec good_spec() {
  IdxSpec spec;
  spec.lengths = {3, 2};
  spec.pointers = {0, 6};
  spec.docs = {0, 1, 2};
  return spec;
}
std::string good_bin() {
  std::string s;
  for (uint16_t v : {1, 2, 3, 4, 5}) put(s, v);
  return s;
}

void write_dataset(const std::string& prefix, const std::string& idx, const std::string& bin) {
  test::write_file(prefix + ".idx", idx);
  test::write_file(prefix + ".bin", bin);
}

// Runs f, which must throw mtnlg::Error, and returns the error.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("expected an mtnlg::Error");
  throw std::logic_error("unreachable");
}

std::vector<int32_t> read_all(const IndexedDataset& ds, int64_t seq) {
  std::vector<int32_t> out(static_cast<size_t>(ds.sequence_length(seq)));
  ds.read(seq, 0, ds.sequence_length(seq), out.data());
  return out;
}

TEST_CASE("uint16 builder round trip matches the format's worked example") {
  test::TempDir dir;
  const std::string prefix = dir.file("ex");
  {
    IndexedDatasetBuilder b(prefix, TokenType::kUInt16);
    b.add_document(std::vector<int32_t>{15496, 995, 50256});
    b.add_document(std::vector<int32_t>{262, 50256});
    CHECK(b.num_documents() == 2);
    CHECK(b.num_tokens() == 5);
    b.finish();
  }
  // The bytes given in data/indexed_format.h.
  const std::string bin = test::read_file(prefix + ".bin");
  const unsigned char want_bin[] = {0x88, 0x3c, 0xe3, 0x03, 0x50, 0xc4, 0x06, 0x01, 0x50, 0xc4};
  REQUIRE(bin.size() == sizeof(want_bin));
  CHECK(std::memcmp(bin.data(), want_bin, sizeof(want_bin)) == 0);
  IdxSpec want;
  want.lengths = {3, 2};
  want.pointers = {0, 6};
  want.docs = {0, 1, 2};
  CHECK(test::read_file(prefix + ".idx") == want.bytes());
  CHECK(want.bytes().size() == 82);

  auto ds = IndexedDataset::open(prefix);
  CHECK(ds->prefix() == prefix);
  CHECK(ds->token_type() == TokenType::kUInt16);
  CHECK(ds->num_sequences() == 2);
  CHECK(ds->num_documents() == 2);
  CHECK(ds->num_tokens() == 5);
  CHECK(read_all(*ds, 0) == std::vector<int32_t>{15496, 995, 50256});
  CHECK(read_all(*ds, 1) == std::vector<int32_t>{262, 50256});
}

TEST_CASE("uint16 and int32 round trips keep documents and lengths and ids") {
  const bool wide = GENERATE(false, true);
  const TokenType type = wide ? TokenType::kInt32 : TokenType::kUInt16;
  const int32_t big = wide ? 2147483647 : 65535;
  const std::vector<std::vector<int32_t>> docs = {
      {7, 8, 9, 10}, {}, {big, 0}, {1}, {300, 301, 302, 303, 304, 305}};
  test::TempDir dir;
  const std::string prefix = dir.file("rt");
  IndexedDatasetBuilder b(prefix, type);
  for (const auto& d : docs) b.add_document(d);
  b.finish();

  auto ds = IndexedDataset::open(prefix);
  CHECK(ds->token_type() == type);
  CHECK(fs::file_size(prefix + ".bin") == 13 * token_size(type));
  // The empty document is recorded with no sequence, as Megatron's builder records it.
  REQUIRE(ds->num_sequences() == 4);
  REQUIRE(ds->num_documents() == 5);
  CHECK(ds->num_tokens() == 13);
  std::vector<int64_t> di;
  for (int64_t i = 0; i <= ds->num_documents(); ++i) di.push_back(ds->document_index(i));
  CHECK(di == std::vector<int64_t>{0, 1, 1, 2, 3, 4});
  CHECK(ds->document_length(1) == 0);
  const std::vector<std::vector<int32_t>> sequences = {docs[0], docs[2], docs[3], docs[4]};
  for (int64_t s = 0; s < 4; ++s) {
    const auto& want = sequences[static_cast<size_t>(s)];
    CHECK(ds->sequence_length(s) == static_cast<int64_t>(want.size()));
    CHECK(read_all(*ds, s) == want);
  }
  // A partial read from the middle of a sequence.
  int32_t part[3] = {-1, -1, -1};
  ds->read(3, 2, 3, part);
  CHECK(std::vector<int32_t>(part, part + 3) == std::vector<int32_t>{302, 303, 304});
  // Out-of-range reads are invariant violations.
  CHECK(error_of([&] { ds->read(3, 4, 3, part); }).code() == Code::kInternal);
  CHECK(error_of([&] { ds->read(4, 0, 0, part); }).code() == Code::kInternal);
}

TEST_CASE("reader follows multi-sequence documents from a Megatron-style index") {
  // Three sequences, two documents: doc 0 = sequences {0, 1}, doc 1 = sequence {2}.
  test::TempDir dir;
  IdxSpec spec;
  spec.code = 4;  // int32
  spec.lengths = {2, 1, 3};
  spec.pointers = {0, 8, 12};
  spec.docs = {0, 2, 3};
  std::string bin;
  for (int32_t v : {10, 11, 12, 20, 21, 22}) put(bin, v);
  write_dataset(dir.file("m"), spec.bytes(), bin);
  auto ds = IndexedDataset::open(dir.file("m"));
  CHECK(ds->token_type() == TokenType::kInt32);
  CHECK(ds->num_sequences() == 3);
  CHECK(ds->num_documents() == 2);
  CHECK(read_all(*ds, 1) == std::vector<int32_t>{12});
  CHECK(read_all(*ds, 2) == std::vector<int32_t>{20, 21, 22});
}

TEST_CASE("builder rejects ids its token type cannot hold") {
  test::TempDir dir;
  IndexedDatasetBuilder b16(dir.file("a"), TokenType::kUInt16);
  Error e = error_of([&] { b16.add_document(std::vector<int32_t>{1, 65536}); });
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.what(), Catch::Contains("65536") && Catch::Contains("int32"));
  CHECK(error_of([&] { b16.add_document(std::vector<int32_t>{-1}); }).code() ==
        Code::kInvalidArgument);
  IndexedDatasetBuilder b32(dir.file("b"), TokenType::kInt32);
  CHECK(error_of([&] { b32.add_document(std::vector<int32_t>{-5}); }).code() ==
        Code::kInvalidArgument);
  b32.add_document(std::vector<int32_t>{65536});  // fine in int32
}

TEST_CASE("builder commits atomically") {
  test::TempDir dir;
  const std::string prefix = dir.file("atom");
  SECTION("no files at all without finish") {
    {
      IndexedDatasetBuilder b(prefix, TokenType::kUInt16);
      b.add_document(std::vector<int32_t>{1, 2, 3});
      CHECK_FALSE(fs::exists(prefix + ".bin"));
      CHECK_FALSE(fs::exists(prefix + ".idx"));
    }
    CHECK(fs::is_empty(dir.path()));
  }
  SECTION("finish leaves exactly the two final files") {
    IndexedDatasetBuilder b(prefix, TokenType::kUInt16);
    b.add_document(std::vector<int32_t>{1, 2, 3});
    b.finish();
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
    CHECK(fs::exists(prefix + ".bin"));
    CHECK(fs::exists(prefix + ".idx"));
  }
  SECTION("an abandoned rebuild leaves the previous dataset intact") {
    {
      IndexedDatasetBuilder b(prefix, TokenType::kUInt16);
      b.add_document(std::vector<int32_t>{4, 5});
      b.finish();
    }
    {
      IndexedDatasetBuilder b(prefix, TokenType::kInt32);
      b.add_document(std::vector<int32_t>{9, 9, 9, 9});
    }
    auto ds = IndexedDataset::open(prefix);
    CHECK(ds->token_type() == TokenType::kUInt16);
    CHECK(read_all(*ds, 0) == std::vector<int32_t>{4, 5});
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
  }
}

TEST_CASE("builder reports a missing output directory") {
  test::TempDir dir;
  Error e = error_of([&] { IndexedDatasetBuilder b(dir.file("no/such/x"), TokenType::kInt32); });
  CHECK(e.code() == Code::kIOError);
  CHECK_THAT(e.what(), Catch::Contains("no/such/x"));
}

TEST_CASE("open reports missing files as not found naming the file") {
  test::TempDir dir;
  const std::string prefix = dir.file("gone");
  Error e = error_of([&] { IndexedDataset::open(prefix); });
  CHECK(e.code() == Code::kNotFound);
  CHECK_THAT(e.what(), Catch::Contains(prefix + ".idx") && Catch::Contains("data.blend"));

  test::write_file(prefix + ".idx", good_spec().bytes());
  e = error_of([&] { IndexedDataset::open(prefix); });
  CHECK(e.code() == Code::kNotFound);
  CHECK_THAT(e.what(), Catch::Contains(prefix + ".bin"));

  // A prefix given with its file's suffix: the fix names the prefix, and the tool that makes one.
  for (const std::string suffix : {".bin", ".idx"}) {
    e = error_of([&] { IndexedDataset::open(prefix + suffix); });
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains("without " + suffix + "; the fix: " + prefix + " (for"));
  }
  e = error_of([&] { IndexedDataset::open(dir.file("other")); });
  CHECK_THAT(e.what(), Catch::Contains("mtnlg-preprocess"));
}

TEST_CASE("open rejects malformed index files") {
  test::TempDir dir;
  const std::string prefix = dir.file("bad");
  std::string idx = good_spec().bytes();
  std::string bin = good_bin();
  Code code = Code::kCorruption;
  std::string says;

  bool good = false;  // no early return: Catch finds sibling sections by running past them
  SECTION("the good files open") {
    good = true;
  }
  SECTION("wrong magic") {
    idx[0] = 'X';
    says = "magic";
  }
  SECTION("shorter than the header") {
    idx.resize(20);
    says = "header";
  }
  SECTION("wrong version") {
    IdxSpec s = good_spec();
    s.version = 2;
    idx = s.bytes();
    says = "version 2";  // corruption (exit 4): only version 1 exists
  }
  SECTION("unknown dtype code") {
    IdxSpec s = good_spec();
    s.code = 9;
    idx = s.bytes();
    says = "dtype code 9";
  }
  SECTION("known but unsupported dtype") {
    IdxSpec s = good_spec();
    s.code = 5;
    idx = s.bytes();
    code = Code::kUnsupported;
    says = "int64";
  }
  SECTION("too short for its counts") {
    idx.pop_back();
    says = "too short";
  }
  SECTION("absurd sequence count") {
    const uint64_t huge = uint64_t{1} << 62;
    std::memcpy(idx.data() + 18, &huge, 8);
    says = "too short";
  }
  SECTION("truncated .bin") {
    bin.pop_back();
    says = "truncated";
  }
  SECTION("pointer past the end of .bin") {
    IdxSpec s = good_spec();
    s.pointers = {0, 1000};
    idx = s.bytes();
    says = "truncated";
  }
  SECTION("a .bin longer than its sequences") {
    bin += std::string(4, '\0');
    says = "cover 10";
  }
  SECTION("uint16 index over int32 tokens") {
    bin.clear();
    for (int32_t v : {1, 2, 3, 4, 5}) put(bin, v);
    says = "another width";
  }
  SECTION("overlapping sequences") {
    IdxSpec s = good_spec();
    s.pointers = {0, 4};
    idx = s.bytes();
    says = "ends at byte 6";
  }
  SECTION("trailing bytes after the arrays (a count lowered)") {
    IdxSpec s = good_spec();
    std::string b = s.bytes();
    const uint64_t fewer = 2;  // 3 document indices written, 2 counted
    std::memcpy(b.data() + 26, &fewer, 8);
    idx = b;
    says = "8 bytes after";
  }
  SECTION("documents covering only part of the sequences") {
    IdxSpec s = good_spec();
    s.docs = {0, 1};
    idx = s.bytes();
    says = "cover only part";
  }
  SECTION("negative length") {
    IdxSpec s = good_spec();
    s.lengths = {-3, 2};
    idx = s.bytes();
    says = "length -3";
  }
  SECTION("decreasing document indices") {
    IdxSpec s = good_spec();
    s.docs = {0, 2, 1};
    idx = s.bytes();
    says = "must not decrease";
  }
  SECTION("document indices past the sequences") {
    IdxSpec s = good_spec();
    s.docs = {0, 1, 3};
    idx = s.bytes();
    says = "within the 2 sequences";
  }
  SECTION("document indices not starting at 0") {
    IdxSpec s = good_spec();
    s.docs = {1, 2};
    idx = s.bytes();
    says = "start with 0";
  }
  SECTION("no document indices") {
    IdxSpec s = good_spec();
    s.docs = {};
    idx = s.bytes();
    says = "start with 0";
  }
  write_dataset(prefix, idx, bin);
  if (good) {
    CHECK(IndexedDataset::open(prefix)->num_tokens() == 5);
    return;
  }
  Error e = error_of([&] { IndexedDataset::open(prefix); });
  CHECK(code_name(e.code()) == std::string(code_name(code)));
  CHECK_THAT(e.what(), Catch::Contains(says));
  CHECK_THAT(e.what(), Catch::Contains(prefix));  // names the file
  CHECK_THAT(e.what(), Catch::Contains("fix"));
}

}  // namespace
}  // namespace mtnlg
