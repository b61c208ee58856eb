// data/index_cache.h: every index type round-trips through a cache entry with its type, an array
// written before typed headers (type code 0) still reads as the signed integers of its width,
// and a header whose type and width disagree is corruption naming the file.
#include "data/index_cache.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "core/status.h"
#include "test_util.h"

namespace mtnlg {
namespace {

// The header word at byte `offset` (4 bytes, little endian) of an array file, rewritten.
void patch_u32(const std::string& path, long offset, uint32_t value) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f != nullptr);
  std::fseek(f, offset, SEEK_SET);
  std::fwrite(&value, 4, 1, f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("index arrays of every type round-trip through the cache with their type") {
  test::TempDir dir;
  const IndexCache cache(dir.file("cache"), "Test", "{\"k\": 1}");
  const std::vector<std::pair<IndexType, int64_t>> cases = {
      {IndexType::kInt16, std::numeric_limits<int16_t>::max()},
      {IndexType::kInt32, std::numeric_limits<int32_t>::max()},
      {IndexType::kUInt32, std::numeric_limits<uint32_t>::max()},
      {IndexType::kInt64, std::numeric_limits<int64_t>::max()}};
  for (const auto& [type, big] : cases) {
    INFO(index_type_name(type));
    IndexArray a(3, type);
    a.set(0, 0);
    a.set(1, big);
    a.set(2, 7);
    CHECK(a[1] == big);
    CHECK(a.bytes() == 3u * static_cast<size_t>(index_type_width(type)));
    cache.store(index_type_name(type), a);
    const IndexArray b = cache.load(index_type_name(type), 3);
    CHECK(b.type() == type);
    CHECK(b == a);
  }
}

TEST_CASE("an index array written before typed headers reads as signed of its width") {
  test::TempDir dir;
  const IndexCache cache(dir.file("cache"), "Test", "{\"k\": 2}");
  IndexArray a(2, IndexType::kInt32);
  a.set(0, -5);
  a.set(1, 9);
  cache.store("old", a);
  patch_u32(cache.path("old"), 12, 0);  // the type word older files hold
  const IndexArray b = cache.load("old", 2);
  CHECK(b.type() == IndexType::kInt32);
  CHECK(b[0] == -5);
  CHECK(b[1] == 9);
  // A type that disagrees with the width (uint32 in 8 bytes) is not an index array.
  patch_u32(cache.path("old"), 12, 3);
  patch_u32(cache.path("old"), 8, 8);
  CHECK_THROWS_WITH(cache.load("old", 2),
                    Catch::Contains("bad header") && Catch::Contains(cache.path("old")));
  patch_u32(cache.path("old"), 8, 4);
  patch_u32(cache.path("old"), 12, 9);  // an unknown type
  CHECK_THROWS_WITH(cache.load("old", 2), Catch::Contains("bad header"));
}

}  // namespace mtnlg
