#include "parallel/store.h"

#include <catch2/catch.hpp>

#include <thread>

#include "core/status.h"

namespace mtnlg {
namespace {

using std::chrono::milliseconds;

TEST_CASE("owned_key and key_owner round-trip the setter rank") {
  CHECK(owned_key("gloo/tensor.0x2/1", 17) == "gloo/tensor.0x2/1@17");
  CHECK(key_owner("gloo/tensor.0x2/1@17") == 17);
  CHECK(key_owner("nccl/world/unique_id") == 0);
  CHECK(key_owner("a@b") == 0);
  CHECK(key_owner("trailing@") == 0);
}

TEST_CASE("MemoryStore get waits for a value set by another thread") {
  MemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    store.set("k", {1, 2, 3});
  });
  const auto v = store.get("k", milliseconds(10000));
  setter.join();
  CHECK(v == std::vector<uint8_t>{1, 2, 3});
  store.wait({"k"}, milliseconds(10));
}

TEST_CASE("MemoryStore get times out naming the key and the time waited") {
  MemoryStore store;
  store.set("present", {});
  REQUIRE_THROWS_WITH(store.get("absent", milliseconds(20)),
                      Catch::Contains("'absent'") && Catch::Contains("20 ms"));
  REQUIRE_THROWS_WITH(store.wait({"present", "missing"}, milliseconds(20)),
                      Catch::Contains("'missing'") && !Catch::Contains("'present'"));
}

TEST_CASE("PrefixStore namespaces keys and keeps the owner suffix last") {
  MemoryStore base;
  PrefixStore a("group.a", base), b("group.b", base);
  a.set(owned_key("0", 3), {7});
  b.set(owned_key("0", 3), {8});
  CHECK(a.get("0@3", milliseconds(10)) == std::vector<uint8_t>{7});
  CHECK(b.get("0@3", milliseconds(10)) == std::vector<uint8_t>{8});
  CHECK(key_owner("group.a/0@3") == 3);
  CHECK(base.get("group.a/0@3", milliseconds(10)) == std::vector<uint8_t>{7});
}

TEST_CASE("next_use counts per name - locally") {
  MemoryStore store;
  CHECK(store.next_use("gloo/world.0x2/0") == 0);
  CHECK(store.next_use("gloo/world.0x2/0") == 1);
  CHECK(store.next_use("gloo/world.0x2/1") == 0);
}

}  // namespace
}  // namespace mtnlg
