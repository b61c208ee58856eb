# Tests that are not Catch2 executables (scripts, end-to-end runs, PyTorch references).
# Included by tests/CMakeLists.txt; append new tests below, one block each.

# scripts/prepare_demo_data.py: GPT-2 BPE ids and the .bin/.idx bytes it writes.
# Needs the Debian packages python3-regex and python3-numpy.
add_test(NAME prepare_demo_data_roundtrip
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/data/prepare_demo_data_test.py)
set_tests_properties(prepare_demo_data_roundtrip PROPERTIES TIMEOUT 300)
