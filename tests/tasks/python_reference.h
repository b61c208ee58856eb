// Python as the reference of the evaluation tasks' tests: a program's stdout, run by
// /usr/bin/python3 (the test is skipped where it is missing), and its whitespace-separated words.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace mtnlg::tasks {

inline std::string python(const std::string& program) {
  const char* py = "/usr/bin/python3";
  if (std::FILE* f = std::fopen(py, "r")) {
    std::fclose(f);
  } else {
    test::skip_test("no /usr/bin/python3 to compare with");
  }
  char path[] = "/tmp/mtnlg-python-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, program.data(), program.size()) == static_cast<ssize_t>(program.size()));
  close(fd);
  std::string text;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> pipe(
        popen((std::string(py) + " " + path).c_str(), "r"), pclose);
    REQUIRE(pipe != nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0) text.append(buf, n);
  }
  std::remove(path);
  return text;
}

inline std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

}  // namespace mtnlg::tasks
