// Catch2 main for the CPU tests. Exit status 77 is CTest's SKIP_RETURN_CODE for every test
// (tests/CMakeLists.txt) and means "skipped" only: a test of a capability this CPU lacks ends
// through test::skip_test(). Catch returns the number of failed assertions, which could be 77,
// so any failure exits 1.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 ? 0 : 1;
}
