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

# mtnlg-preprocess's command line: --help, small runs, exit codes and leftovers of bad input.
add_test(NAME preprocess_cli
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/data/preprocess_cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(preprocess_cli PROPERTIES TIMEOUT 300)

# The GPT-2 tokenizer fixtures (made with the npm package gpt-3-encoder) against GPT-2's own
# Python algorithm (scripts/prepare_demo_data.py). Needs python3-regex.
add_test(NAME gpt2_tokenizer_fixtures_python
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/data/check_tokenizer_fixtures.py)
set_tests_properties(gpt2_tokenizer_fixtures_python PROPERTIES TIMEOUT 300)

# mtnlg-comm-check on real processes: PMIx bootstrap (mpirun is only the launcher and PMIx
# server; our code calls no MPI) and every Gloo collective, on 1-4 ranks (CI: 2 cores, root).
add_executable(mtnlg-comm-check ${PROJECT_SOURCE_DIR}/tests/parallel/comm_check_main.cc)
target_compile_options(mtnlg-comm-check PRIVATE ${MTNLG_WARNINGS})
target_link_libraries(mtnlg-comm-check PRIVATE mtnlg_parallel)
find_program(MTNLG_MPIRUN mpirun)
if(MTNLG_MPIRUN)
  set(mtnlg_mpirun_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  foreach(np 1 2 3 4)
    add_test(NAME pmix_launch_np${np}
      COMMAND ${MTNLG_MPIRUN} --oversubscribe --allow-run-as-root -np ${np}
              $<TARGET_FILE:mtnlg-comm-check> --timeout-s 20)
    set_tests_properties(pmix_launch_np${np} PROPERTIES TIMEOUT 60
      ENVIRONMENT "${mtnlg_mpirun_env}" FAIL_REGULAR_EXPRESSION "FAILED")
  endforeach()
  # Rank 1 SIGKILLs itself after the first all_reduce: every other rank must fail, naming it.
  add_test(NAME pmix_launch_peer_killed
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/pmix_kill_test.sh
            ${MTNLG_MPIRUN} $<TARGET_FILE:mtnlg-comm-check>)
  set_tests_properties(pmix_launch_peer_killed PROPERTIES TIMEOUT 60
    ENVIRONMENT "${mtnlg_mpirun_env}")
endif()
