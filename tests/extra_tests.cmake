# Tests that are not Catch2 executables (scripts, end-to-end runs, PyTorch references).
# Included by tests/CMakeLists.txt; append new tests below, one block each.

# scripts/prepare_demo_data.py: GPT-2 BPE ids and the .bin/.idx bytes it writes.
# Needs the Debian packages python3-regex and python3-numpy.
add_test(NAME prepare_demo_data_roundtrip
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/data/prepare_demo_data_test.py)
set_tests_properties(prepare_demo_data_roundtrip PROPERTIES TIMEOUT 300)

# mtnlg-train's command line: --help, --dry-run of the paper's recipe, exit codes of bad input.
add_test(NAME cli_train_command
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_train_command PROPERTIES TIMEOUT 300)
