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

# mtnlg-data's command line: samples on a preprocessed corpus in both formats, exit codes.
add_test(NAME cli_data_command
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/data_cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_data_command PROPERTIES TIMEOUT 300)

# mtnlg-recipe from-megatron: a Megatron command line into a recipe that trains, exit codes.
add_test(NAME cli_recipe_command
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/recipe_cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_recipe_command PROPERTIES TIMEOUT 300)

# Portable binaries: no AVX-512 in our code, and the same training on an emulated AVX2-only CPU.
add_test(NAME portable_build
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/portable_build_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR} ${MTNLG_CPU_TARGET})
set_tests_properties(portable_build PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 COST 300)

# Seeded fuzzing of mtnlg-train's inputs (tests/cmd/fuzz_inputs.py): mutated recipes (files and
# --set) and .idx/.bin pairs; fails on a crash, a hang, an internal error, exit 0 on invalid
# input or an error naming no key or file. 2000 recipe and 200 dataset cases, about 90 s alone on
# 2 cores (a process start is ~40 ms, most of it loading the BLAS, oneDNN, Gloo and NCCL
# libraries); --long for a local soak of 20x that.
# COST (here and below): the longest tests start first, so that under ctest -j2 none of them is
# left running alone at the end of a fresh build's run (which has no timings to sort by).
add_test(NAME fuzz_recipes_and_datasets
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/cmd/fuzz_inputs.py ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR} --seed 1)
set_tests_properties(fuzz_recipes_and_datasets PROPERTIES TIMEOUT 600 COST 400)

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
if(MTNLG_CUDA)  # --transport nccl, for the GPU kit's killed-peer check
  target_link_libraries(mtnlg-comm-check PRIVATE mtnlg_cuda)
endif()
find_program(MTNLG_MPIRUN mpirun)
# The multi-rank tests need a launcher; without one they would silently not exist.
if(NOT MTNLG_MPIRUN)
  message(FATAL_ERROR "mpirun not found: the multi-rank tests (layouts, killed ranks, checkpoints) "
    "need it; run scripts/setup.sh (Debian's openmpi-bin) or configure with -DMTNLG_TESTS=OFF")
endif()
if(MTNLG_MPIRUN)
  set(mtnlg_mpirun_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  foreach(np 1 2 3 4)
    add_test(NAME pmix_launch_np${np}
      COMMAND ${MTNLG_MPIRUN} --oversubscribe --allow-run-as-root -np ${np}
              $<TARGET_FILE:mtnlg-comm-check> --timeout-s 20)
    set_tests_properties(pmix_launch_np${np} PROPERTIES TIMEOUT 60
      ENVIRONMENT "${mtnlg_mpirun_env}" FAIL_REGULAR_EXPRESSION "FAILED")
  endforeach()
  # The same on our TCP and on shared memory between real processes: every rank must say which
  # transport it got (single copy: process_vm_readv between the ranks; MTNLG_SHM_SINGLE_COPY=0:
  # through the segment), so a silent fallback to another transport fails the test.
  foreach(variant "tcp;3;tcp;group 'world'" "shm;2;shm;single copy" "shm;4;shm;single copy"
                  "shm_two_copies;3;shm;shared memory)")
    list(GET variant 0 tname)
    list(GET variant 1 np)
    list(GET variant 2 transport)
    list(GET variant 3 expect)
    set(copies 1)
    if(tname STREQUAL "shm_two_copies")
      set(copies 0)
    endif()
    add_test(NAME pmix_launch_${tname}_np${np}
      COMMAND bash -c "set -o pipefail; MTNLG_SHM_SINGLE_COPY=${copies} $0 --oversubscribe \
        --allow-run-as-root -np ${np} $1 --timeout-s 20 --transport ${transport} | tee /dev/stderr \
        | grep -F -c \"$2\" | grep -qx ${np}"
        ${MTNLG_MPIRUN} $<TARGET_FILE:mtnlg-comm-check> "${expect}")
    set_tests_properties(pmix_launch_${tname}_np${np} PROPERTIES TIMEOUT 60
      ENVIRONMENT "${mtnlg_mpirun_env}" FAIL_REGULAR_EXPRESSION "FAILED")
  endforeach()
  # Rank 1 SIGKILLs itself after the first all_reduce: every other rank must fail, naming it.
  add_test(NAME pmix_launch_peer_killed
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/pmix_kill_test.sh
            ${MTNLG_MPIRUN} $<TARGET_FILE:mtnlg-comm-check>)
  # The script bounds each run by (np + 1) x its timeout_s (5 s): 20 + 25 s, plus mpirun start-up.
  set_tests_properties(pmix_launch_peer_killed PROPERTIES TIMEOUT 90
    ENVIRONMENT "${mtnlg_mpirun_env}")
  # The same over shared memory: a dead peer rings no bell, so its waiters find it by its pid.
  add_test(NAME pmix_launch_peer_killed_shm
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/pmix_kill_test.sh
            ${MTNLG_MPIRUN} $<TARGET_FILE:mtnlg-comm-check> shm)
  set_tests_properties(pmix_launch_peer_killed_shm PROPERTIES TIMEOUT 90
    ENVIRONMENT "${mtnlg_mpirun_env}")
  # PeerWatch (what NCCL waits use to name a dead peer) under mpirun's PMIx server.
  add_test(NAME pmix_launch_peer_watch
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/peer_watch_test.sh mpirun ${MTNLG_MPIRUN}
            $<TARGET_FILE:mtnlg-comm-check>)
  set_tests_properties(pmix_launch_peer_watch PROPERTIES TIMEOUT 120
    ENVIRONMENT "${mtnlg_mpirun_env}")
  # A rank waiting 2 s for a late peer sleeps: at most 5% of the wait on the CPU, per transport.
  foreach(transport shm tcp gloo)
    add_test(NAME pmix_launch_idle_wait_${transport}
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/idle_wait_test.sh ${MTNLG_MPIRUN}
              $<TARGET_FILE:mtnlg-comm-check> ${transport})
    set_tests_properties(pmix_launch_idle_wait_${transport} PROPERTIES TIMEOUT 60
      ENVIRONMENT "${mtnlg_mpirun_env}")
  endforeach()
endif()

# mtnlg-comm-check launched by Slurm: scripts/slurm/cluster.sh starts a one-node cluster
# (munged, slurmctld, slurmd from Debian's slurm-wlm, 8 CPUs whatever the machine has) in
# build/slurm, srun --mpi=pmix starts the ranks under Slurm's PMIx server (mpi_pmix.so), and the
# cleanup stops exactly those daemons. A machine where Slurm cannot run fails the setup test,
# which names the daemon and prints its log; the srun tests are then not run.
set(mtnlg_slurm_dir ${CMAKE_BINARY_DIR}/slurm)
add_test(NAME slurm_cluster_start
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/slurm/cluster.sh start --dir ${mtnlg_slurm_dir})
set_tests_properties(slurm_cluster_start PROPERTIES TIMEOUT 120 FIXTURES_SETUP slurm_cluster)
foreach(np 2 4)
  # srun by name: found on PATH when the test runs (the setup test says when it is missing).
  add_test(NAME slurm_srun_pmix_np${np}
    COMMAND srun --mpi=pmix --kill-on-bad-exit=1 --time=2 -n ${np}
            $<TARGET_FILE:mtnlg-comm-check> --timeout-s 20)
  set_tests_properties(slurm_srun_pmix_np${np} PROPERTIES TIMEOUT 90
    ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster
    FAIL_REGULAR_EXPRESSION "FAILED")
endforeach()
# PeerWatch under Slurm's PMIx server (srun leaves the survivors running when a task dies).
add_test(NAME slurm_srun_peer_watch
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/parallel/peer_watch_test.sh srun srun
          $<TARGET_FILE:mtnlg-comm-check>)
set_tests_properties(slurm_srun_peer_watch PROPERTIES TIMEOUT 120
  ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
# mtnlg-train itself under srun: 2 and 4 data-parallel ranks match one process.
add_test(NAME slurm_srun_dp_train
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/dp_train_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR} srun)
set_tests_properties(slurm_srun_dp_train PROPERTIES TIMEOUT 300
  ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
# A rank failing before the rendezvous while srun leaves the others running (--kill-on-bad-exit=0):
# the others stop within seconds, naming it (Store::publish_failure through PMIx).
add_test(NAME slurm_rank_fails_at_start
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/rank_fails_at_start_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR})
set_tests_properties(slurm_rank_fails_at_start PROPERTIES TIMEOUT 400
  ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
# Preemption under Slurm: small.sbatch signalled (USR1 to the batch shell), saved, requeued, resumed,
# bit for bit the run that never stopped. The script pauses the job's tasks while the signal
# travels through Slurm (seconds on a loaded machine; the job once trained all its iterations
# first), so the outcome does not depend on the load; alone (RUN_SERIAL) all the same, as it
# trains two ranks on this machine's two cores.
add_test(NAME slurm_requeue_resume
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/slurm_requeue_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR})
set_tests_properties(slurm_requeue_resume PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
# A stop while the step starts: SIGUSR1's default action ends the tasks before they have their
# handlers (srun exits 138); requeue.sh requeues as for exit 75 and the run completes, bit for bit
# the run that never stopped. The first run's tasks sleep in a wrapper, so the signal lands there.
add_test(NAME slurm_requeue_startup
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/slurm_requeue_startup_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR})
set_tests_properties(slurm_requeue_startup PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
# mtnlg-curate's dedup steps as Slurm array jobs: one process's bytes.
if(MTNLG_CURATE)
  add_test(NAME slurm_curate_dedup
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/curate/dedup_slurm_test.sh ${PROJECT_BINARY_DIR}
            ${PROJECT_SOURCE_DIR})
  set_tests_properties(slurm_curate_dedup PROPERTIES TIMEOUT 300
    ENVIRONMENT "SLURM_CONF=${mtnlg_slurm_dir}/slurm.conf" FIXTURES_REQUIRED slurm_cluster)
endif()
add_test(NAME slurm_cluster_stop
  COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/slurm/cluster.sh stop --dir ${mtnlg_slurm_dir})
set_tests_properties(slurm_cluster_stop PROPERTIES TIMEOUT 60 FIXTURES_CLEANUP slurm_cluster)

# scripts/sweep.sh and scripts/metrics_summary.py: a two-point sweep of the tiny recipe, a sweep
# with a failing combination, --sbatch with a fake sbatch (and the job script run under a fake
# srun), and the command line. Each case is its own test.
foreach(case local failure sbatch cli checkpoints)
  add_test(NAME sweep_${case}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/sweep_test.sh
            ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${case})
  set_tests_properties(sweep_${case} PROPERTIES TIMEOUT 120)
endforeach()

# scripts/plot_metrics.py: PNGs per run and overlaid, and its errors. Needs python3-matplotlib.
add_test(NAME plot_metrics
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/plot_metrics_test.sh
          ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(plot_metrics PROPERTIES TIMEOUT 120)

# Data parallelism: one process vs 2 and 4 ranks under mpirun give the same losses.
add_test(NAME dp_train_matches_single_process
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/dp_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(dp_train_matches_single_process PROPERTIES TIMEOUT 600)

# Pipeline parallelism (1F1B): 2 and 4 stages, and 2 stages x 2 data ranks, under mpirun give the
# losses and grad norms of one process.
if(MTNLG_MPIRUN)
  add_test(NAME pp_train_matches_single_process
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/pp_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(pp_train_matches_single_process PROPERTIES TIMEOUT 600)
endif()

# Tensor parallelism: one process vs tp 2, tp 4 and tp 2 x dp 2 (plain and ZeRO-1) under mpirun
# give the same losses and grad norms.
add_test(NAME tp_train_matches_single_process
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/tp_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(tp_train_matches_single_process PROPERTIES TIMEOUT 600)

# The environment launch (scripts/launch.sh, no PMIx): tp 2 x dp 2 and pp 2 x dp 2 (ZeRO-1) train
# like one process; a reused store directory, a failing rank and usage errors are handled.
add_test(NAME env_launch_train_matches_single_process
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/env_launch_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(env_launch_train_matches_single_process PROPERTIES TIMEOUT 600)

# Tensor x pipeline (x data): (2, 2, 1) and (2, 2, 2), plain and ZeRO-1, under mpirun give the
# losses and grad norms of one process.
if(MTNLG_MPIRUN)
  add_test(NAME tp_pp_train_matches_single_process
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/tp_pp_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(tp_pp_train_matches_single_process PROPERTIES TIMEOUT 600)
endif()

# model.init_from (a Hugging Face GPT-2 file) under tp 2, pp 2 and tp 2 x pp 2 trains like one
# process.
if(MTNLG_MPIRUN)
  add_test(NAME init_from_train_matches_single_process
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/init_from_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(init_from_train_matches_single_process PROPERTIES TIMEOUT 600)
endif()

# A rank of mtnlg-train SIGKILLed mid-run (tp 2 x dp 2 with ZeRO-1, pp 2 x dp 2; 4 ranks): every
# other rank exits non-zero on its own within parallel.timeout_s, naming the group, op and peer.
if(MTNLG_MPIRUN)
  add_test(NAME train_rank_killed_mid_run
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/train_kill_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  # Each of the three cases is bounded by the script at start (6 x timeout_s) + exit (np x
  # timeout_s) + 10 s with timeout_s 10: 110 s; a normal run takes about 40 s in all.
  set_tests_properties(train_rank_killed_mid_run PROPERTIES TIMEOUT 400)
endif()

# Checkpoints end to end: exact resume in three layouts, the reshard chain, offline convert and
# export round trips (resume_train_test.sh); stop signals and the time budget exit 75 and resume
# (stop_signal_test.sh); kill -9 during saves (ckpt_kill_test.sh); bad checkpoints and a full
# disk (ckpt_errors_test.sh).
if(MTNLG_MPIRUN)
  add_test(NAME checkpoint_resume_and_reshard
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/resume_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(checkpoint_resume_and_reshard PROPERTIES TIMEOUT 600)
  add_test(NAME checkpoint_stop_signals
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/stop_signal_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(checkpoint_stop_signals PROPERTIES TIMEOUT 600)
  add_test(NAME checkpoint_kill9_during_saves
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/ckpt_kill_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(checkpoint_kill9_during_saves PROPERTIES TIMEOUT 600 COST 300)
endif()
add_test(NAME checkpoint_bad_input
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/ckpt_errors_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(checkpoint_bad_input PROPERTIES TIMEOUT 300)

# Mixed precision: bf16 (demo model) and fp16 (tiny) follow fp32 over 200 iterations; bf16 and fp16 under (2, 2, 2)
# and (1, 2, 4) + ZeRO-1 follow their one-process runs over the first 100, within the band the
# script derives.
if(MTNLG_MPIRUN)
  add_test(NAME precision_mixed_band
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/precision_band_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  # COST: one of the longest tests (75 s alone, longer under ctest -j2); a fresh build has no
  # timing data, so without it
  # ctest would start it last and run it alone at the end.
  set_tests_properties(precision_mixed_band PROPERTIES TIMEOUT 600 COST 1000)
endif()

# precision: fp8 (the CPU's emulation): hybrid/e4m3 and delayed/current follow bf16 over 300
# iterations of the tiny model; (1, 2, 4) + ZeRO-1, tp 2 (with sp and dp 2) and current scaling
# at tp 2 follow one process over the first 100, within the bands the script derives; a tp 2
# checkpoint resumes in one process; the scaling state resumes bit for bit; a bf16 checkpoint
# starts fresh scales.
if(MTNLG_MPIRUN)
  add_test(NAME precision_fp8_band
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/fp8_band_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(precision_fp8_band PROPERTIES TIMEOUT 600 COST 500)
endif()

# Checkpoints in bf16 and fp16: exact resume in (1,1,1) and (2,2,2) + ZeRO-1; bf16 -> fp32 and fp32 -> bf16
# resumes continue within the bf16 band.
if(MTNLG_MPIRUN)
  add_test(NAME precision_mixed_resume
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/precision_resume_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(precision_mixed_resume PROPERTIES TIMEOUT 600)
endif()

# data/numpy_random.h against the installed numpy's RandomState, live (random seeds and lengths;
# the fixed fixtures are in numpy_random_test.cc). numpy comes with python3-torch (setup.sh).
add_executable(numpy_shuffle_tool ${PROJECT_SOURCE_DIR}/tests/data/numpy_shuffle_tool.cc)
target_compile_options(numpy_shuffle_tool PRIVATE ${MTNLG_WARNINGS})
target_include_directories(numpy_shuffle_tool PRIVATE ${PROJECT_SOURCE_DIR})
add_test(NAME numpy_random_matches_numpy
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/data/numpy_random_check.py
          $<TARGET_FILE:numpy_shuffle_tool>)
set_tests_properties(numpy_random_matches_numpy PROPERTIES TIMEOUT 300)

# mtnlg-generate and mtnlg-eval on a checkpoint trained in the test: greedy ids, text, JSON
# lines, standard input, a tensor 2 x pipeline 2 conversion gathered on load, exit codes.
add_test(NAME cli_generate_eval
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/generate_cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_generate_eval PROPERTIES TIMEOUT 300)
# mtnlg-eval --tasks (LAMBADA) against lm-evaluation-harness's algorithm in Python over the
# float64 PyTorch GPT-2, zero- and 2-shot.
add_test(NAME cli_eval_tasks
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/eval_tasks_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_eval_tasks PROPERTIES TIMEOUT 300 COST 200)

# OpenMP's wait policy when the ranks of a node oversubscribe its cores (cmd/openmp_policy.h):
# re-executed with OMP_WAIT_POLICY=passive, a user's policy kept. Skipped on 4 or more cores.
add_test(NAME openmp_wait_policy_oversubscribed
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/openmp_policy_cli_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(openmp_wait_policy_oversubscribed PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# Two nodes on one machine (network namespaces on a bridge, a /dev/shm per node): groups within a
# node get shared memory, groups across nodes our TCP over the bridge, and (2,2,1) and (2,1,2) with
# ZeRO-1 match one process. Skipped (77) where namespaces cannot be made (not root, a container).
add_test(NAME two_nodes_shm_within_tcp_across
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/two_nodes_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(two_nodes_shm_within_tcp_across PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)

# The interleaved 1F1B schedule (parallel.virtual_pipeline: 2): (1,2,1), (1,4,1), (1,2,2)
# overlapped, (2,2,2) + ZeRO-1 with and without sequence parallelism match one process; bytes and
# peaks equal the plan; a 2-chunk checkpoint resumes with 1 chunk.
add_test(NAME interleaved_pipeline_train
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/interleaved_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(interleaved_pipeline_train PROPERTIES TIMEOUT 600)

# Sequence parallelism: (2,1,1), (2,2,2) + ZeRO-1, (2,2,1) + checkpointing and micro-batches of 2
# match one process; bytes sent equal the plan; measured peaks equal the plan, and the saving
# against the same layouts without it equals the count from the shapes.
add_test(NAME sequence_parallel_train
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/sequence_parallel_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(sequence_parallel_train PROPERTIES TIMEOUT 600)

# The TCP transports on real processes: the tp 2 x pp 2 (x dp 2, ZeRO-1) layouts with every group
# forced onto our TCP communicator (MTNLG_TRANSPORT=tcp, what groups spanning nodes use) and
# onto Gloo's (gloo), each matching one process as over shared memory.
foreach(transport tcp gloo)
  add_test(NAME tp_pp_train_over_${transport}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/tp_pp_train_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(tp_pp_train_over_${transport} PROPERTIES TIMEOUT 600
    ENVIRONMENT "MTNLG_TRANSPORT=${transport}")
endforeach()

# scripts/gpu/check.sh's command line without a GPU: its stages, --list, --stages errors.
add_test(NAME gpu_check_args
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/gpu_check_args_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(gpu_check_args PROPERTIES TIMEOUT 60)

# scripts/gpu/report.py and the kit's end-to-end row without a GPU: the 1.3B recipe with the
# kit's overrides (shrunk, on the CPU) trains 8 iterations without evaluation or checkpoint;
# train-row's medians; the bench table's new rows and columns.
add_test(NAME gpu_report
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/scripts/gpu_report_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(gpu_report PROPERTIES TIMEOUT 120)

# mtnlg-bench-train's flags on the CPU: --dropout checked and reaching the model, layout errors.
add_test(NAME train_bench_cli
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/bench/train_bench_cli_test.sh ${PROJECT_BINARY_DIR})
set_tests_properties(train_bench_cli PROPERTIES TIMEOUT 120)

# mtnlg-bench-attention and bench/torch_attention.py on the CPU: usage errors, the FLOP count,
# and scripts/gpu/report.py attention's join of the two.
add_test(NAME attention_bench
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/bench/attention_bench_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(attention_bench PROPERTIES TIMEOUT 120)

# The corpus stages (mtnlg-curate), each against an independent Python reference on real or
# generated text (tests/curate/<stage>_test.sh): bytes independent of threads, kills and reruns;
# bad input named.
if(MTNLG_CURATE)
  foreach(stage dedup decontaminate quality clean extract run nltk)
    add_test(NAME curate_${stage}
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/curate/${stage}_test.sh ${PROJECT_BINARY_DIR}
              ${PROJECT_SOURCE_DIR})
    set_tests_properties(curate_${stage} PROPERTIES TIMEOUT 300)
  endforeach()
endif()

# eval.tasks_interval: a run's task lines equal mtnlg-eval --tasks on its checkpoints, resumed
# and with data ranks; bad settings named.
add_test(NAME cli_train_tasks
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/train_tasks_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_train_tasks PROPERTIES TIMEOUT 300)

# logging.tensorboard_dir: event files decoded in Python (framing, CRC-32C, protobuf), scalars
# equal to the metrics file's under Megatron-LM's names, a resume adding a file.
add_test(NAME cli_tensorboard
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/tensorboard_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_tensorboard PROPERTIES TIMEOUT 300)

# Every C++ and CUDA source is as clang-format 14 writes it (.clang-format); skipped with another
# clang-format major version or outside a git checkout.
add_test(NAME clang_format
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/format_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(clang_format PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# Every relative link in README.md and docs/ resolves, headings' anchors included.
add_test(NAME docs_links
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/docs_links_test.py ${PROJECT_SOURCE_DIR})

# scripts/megatron_to_hf.py: Megatron-LM legacy checkpoints written here (tensor 2 x pipeline 2,
# 1 x 1, 4 x 1) convert back to the original GPT-2 bit for bit and give its loss in mtnlg-eval.
add_test(NAME megatron_to_hf
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/checkpoint/megatron_to_hf_test.py ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(megatron_to_hf PROPERTIES TIMEOUT 300)
# mtnlg-ckpt import / export --format megatron: Megatron-style checkpoints with bf16 and fp32
# optimizer state written here, tensor by tensor, by the loss, by a resumed run; refusals.
add_test(NAME megatron_import
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/checkpoint/megatron_import_test.py ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(megatron_import PROPERTIES TIMEOUT 300)
# Megatron-Core checkpoints: its names in the legacy torch format, and torch_dist (PyTorch's
# distributed checkpoint; stacked and per-layer keys, the common state in common.pt or inside,
# the non-distributed and the fully reshardable distributed optimizer), written in the test.
add_test(NAME megatron_core_import
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/checkpoint/megatron_core_import_test.py ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(megatron_core_import PROPERTIES TIMEOUT 300 COST 200)

# mtnlg-eval --tasks on the training forward and on several ranks: one process (packed rows and
# the stage scorer), tensor 2 x pipeline 2, four replicas and pipeline 2 x data 2 under mpirun
# give the same log-likelihoods and accuracies; bf16 near them; bad placements named.
if(MTNLG_MPIRUN)
  add_test(NAME cli_eval_tasks_layouts
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cmd/eval_tasks_layouts_test.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_eval_tasks_layouts PROPERTIES TIMEOUT 600 ENVIRONMENT "${mtnlg_mpirun_env}")
endif()

# Each script test's Open MPI session directory apart. mpirun makes
# <base>/ompi.<host>.<uid>/pid.<N> and removes ompi.<host>.<uid> when it ends: two tests' mpiruns
# sharing /tmp (ctest -j2) raced there, one removing the directory the other was making its
# pid.<N> in ("orte_session_dir failed", a CI run's tp_train_matches_single_process, 2026-11-28).
# A short base per test (the PMIx server's Unix sockets live under it and their paths must stay
# short), apart per build tree too; mpirun creates it.
string(MD5 mtnlg_build_hash "${PROJECT_BINARY_DIR}")
string(SUBSTRING "${mtnlg_build_hash}" 0 8 mtnlg_build_hash)
get_property(mtnlg_all_tests DIRECTORY PROPERTY TESTS)
set(mtnlg_test_index 0)
foreach(t IN LISTS mtnlg_all_tests)
  if(t MATCHES ":")  # Catch2's unit tests (FILE_test:case) start no mpirun
    continue()
  endif()
  math(EXPR mtnlg_test_index "${mtnlg_test_index} + 1")
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
    OMPI_MCA_orte_tmpdir_base=/tmp/mtnlg-ompi-${mtnlg_build_hash}/${mtnlg_test_index})
endforeach()
