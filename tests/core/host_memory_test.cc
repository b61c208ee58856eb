#include <catch2/catch.hpp>

#include "core/host_memory.h"
#include "core/status.h"

using namespace mtnlg;

namespace {
const std::string kMeminfo =
    "MemTotal:       24684084 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   20000000 kB\n"
    "SwapTotal:       2000000 kB\n"
    "SwapFree:        1000000 kB\n";
}  // namespace

TEST_CASE("available memory is MemAvailable plus free swap when no cgroup limits it") {
  const HostMemory m = host_memory_from(kMeminfo, "", "");
  CHECK(m.available == (20000000LL + 1000000LL) * 1024);
  CHECK(m.source.find("MemAvailable") != std::string::npos);
  // cgroup v2 "max" and v1's near-2^63 value mean no limit.
  CHECK(host_memory_from(kMeminfo, "max\n", "123\n").available == m.available);
  CHECK(host_memory_from(kMeminfo, "9223372036854771712\n", "20307968\n").available == m.available);
}

TEST_CASE("a memory cgroup's limit less its usage wins when it is smaller") {
  const HostMemory m = host_memory_from(kMeminfo, "8589934592\n", "1073741824\n");
  CHECK(m.available == 8589934592LL - 1073741824LL);
  CHECK(m.source.find("cgroup") != std::string::npos);
  // Usage above the limit: nothing left, not a negative figure.
  CHECK(host_memory_from(kMeminfo, "1000\n", "5000\n").available == 0);
  // A larger limit than the machine has: the machine's figure.
  CHECK(host_memory_from(kMeminfo, "1099511627776\n", "0\n").available ==
        (20000000LL + 1000000LL) * 1024);
}

TEST_CASE("no meminfo and no cgroup: unknown") {
  CHECK(host_memory_from("", "", "").available == -1);
  CHECK(host_memory_from("MemTotal: 10 kB\n", "", "").available == -1);
}

TEST_CASE("this machine's figure is positive and at most MemTotal plus swap") {
  const HostMemory m = host_memory_available();
  REQUIRE(m.available > 0);
  CHECK(m.available < (int64_t{1} << 50));
}

TEST_CASE("an allocation larger than the node has left is refused naming both figures") {
  CHECK_NOTHROW(check_can_allocate(1 << 20, "small"));  // under 64 MiB: not checked
  try {
    check_can_allocate(int64_t{1} << 60, "a test index");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "memory");  // callers replace it with the key that sized it
    CHECK_THAT(e.message(), Catch::StartsWith("not enough memory for a test index: it needs "
                                              "1073741824.00 GiB (1152921504606846976 bytes) "
                                              "but the node has "));
  }
}
