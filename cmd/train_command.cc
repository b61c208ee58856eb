// mtnlg-train's command (cmd/train_command.h): trains a GPT model from a recipe. Exit status: 0
// success; 2 a bad command line or recipe (the message names the key and the fix); 3 a feature this
// build cannot train yet; 4 missing or corrupt input files or failed I/O (a dead or hung peer
// rank); 75 stopped by a signal (SIGTERM, SIGUSR1, SIGINT) or schedule.exit_duration_minutes after
// saving a checkpoint: resume it; 128 + N stopped by signal N with nothing saved (no
// checkpoint.dir); 1 a diverged run or anything else.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cmd/train_command.h"

#include "cmd/cli_parse.h"
#include "cmd/device_select.h"
#include "cmd/dry_run.h"
#include "cmd/openmp_policy.h"
#include "cmd/trainer.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "parallel/job.h"
#include "parallel/runtime.h"

namespace {

// CLI11's PositiveNumber and Range let NaN through (every comparison with it is false).
std::string check_number(const std::string& text, bool fraction) {
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) return "'" + text + "' is not a number";
  } catch (const std::exception&) {
    return "'" + text + "' is not a number";
  }
  if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
  if (fraction ? !(v >= 0.0 && v <= 1.0) : !(v > 0.0))
    return "'" + text + (fraction ? "' is not in [0, 1]" : "' is not positive");
  return "";
}

CLI::Validator finite_positive() {
  return CLI::Validator([](std::string& t) { return check_number(t, false); }, "POSITIVE",
                        "finite positive");
}
CLI::Validator finite_fraction() {
  return CLI::Validator([](std::string& t) { return check_number(t, true); }, "FRACTION",
                        "finite in [0, 1]");
}

}  // namespace

namespace mtnlg {

int run_train_command(int argc, char** argv, const TrainerHooks& hooks) {
  CLI::App app{
      "mtnlg-train: train a GPT-style decoder from a recipe (YAML).\n"
      "Recipe keys are documented in docs/recipes.md. Exit status: 0 done; 2 bad command line or "
      "recipe; 3 not yet supported by this build; 4 missing or corrupt input file or checkpoint, "
      "or failed I/O (a dead or hung peer rank, a failed save); 75 stopped by SIGTERM, SIGUSR1 or "
      "SIGINT (or schedule.exit_duration_minutes) after saving a checkpoint: run again with "
      "checkpoint.resume: true to continue; 128+N stopped by signal N with nothing saved (no "
      "checkpoint.dir); 1 a diverged run (the message names the key to change) or anything else."};
  app.set_version_flag("--version", "mtnlg-train 0.1.0");
  app.footer(
      "Environment (docs/training.md, docs/launching.md, docs/cpu-transports.md, "
      "docs/bf16-without-avx512.md and docs/attention-kernels.md have the details):\n"
      "  MTNLG_WORLD_SIZE, MTNLG_RANK, MTNLG_LOCAL_RANK, MTNLG_LOCAL_WORLD_SIZE, MTNLG_NODE,\n"
      "  MTNLG_STORE_DIR   launch without PMIx (scripts/launch.sh sets them)\n"
      "  MTNLG_TRANSPORT   CPU groups: auto, shm, tcp or gloo; overrides the recipe's\n"
      "                    parallel.transport (auto by default)\n"
      "  MTNLG_SHM_SINGLE_COPY=0   shared-memory groups without cross-memory attach\n"
      "  MTNLG_GLOO_IFACE, MTNLG_GLOO_HOSTNAME   the interface Gloo's groups use\n"
      "  MTNLG_BF16_FALLBACK   kernel (default: on CPUs without oneDNN's bf16 matmul, bf16\n"
      "                        products on OpenBLAS's kernel, packed from bf16) or widen (on\n"
      "                        widened operands; docs/bf16-without-avx512.md)\n"
      "  MTNLG_CUDA_ATTENTION   cudnn (default: cuDNN's fused attention, bf16/fp16 at head\n"
      "                         sizes multiples of 8 up to 256; where cuDNN is missing or\n"
      "                         refuses a shape, flash2 where it applies; named, an error),\n"
      "                         flash2 (FA2-style kernels, the CPU's dropout masks), blocked,\n"
      "                         or flash2-fwd / flash2-bwd (flash2 in that pass, blocked in\n"
      "                         the other); flash2 bf16/fp16 where it applies (head sizes 64\n"
      "                         and 128; 160 too when named), blocked elsewhere (docs/gpu.md)\n"
      "  MTNLG_CUDA_CUDNN_DQ   deterministic (default: dQ by a GEMM, reruns bit-identical)\n"
      "                         or accumulate (cuDNN's atomic dQ)\n"
      "  MTNLG_CUDA_FLASH2_ROWS   64 (default) or 128 query rows a flash2 forward block\n"
      "  MTNLG_CUDA_FLASH2_DQ   auto (default: stored while dS of a call takes at most 1 GiB),\n"
      "                         stored (flash2's dk/dv pass stores dS for dq) or recompute\n"
      "                         (dq recomputes it: no [s, s] scratch, more products)\n"
      "  MTNLG_CUDA_EPILOGUES   on (default: bias and tanh GeLU in cuBLASLt's epilogue) or off\n"
      "  NCCL_* apply to GPU groups as usual.");
  std::string config;
  std::vector<std::string> overrides;
  bool dry_run = false;
  int threads = 0;
  std::string log_level = "info";
  app.add_option("-c,--config", config, "Recipe YAML file to train (e.g. configs/demo-cpu.yaml)")
      ->required();
  app.add_option("--set", overrides,
                 "Override a recipe key: --set key.path=value (value is YAML; repeatable), "
                 "e.g. --set optimizer.lr=3e-4 --set schedule.train_iters=100");
  auto* dry = app.add_flag("--dry-run", dry_run,
                           "Validate the recipe and print its plan without allocating the model: "
                           "every data.blend prefix opened and counted (--no-data-check: not), "
                           "parameters in total and per rank, memory per rank "
                           "against the GPU (tensors, then the CUDA context, BLAS workspace, "
                           "kernel scratch and NCCL buffers), FLOPs, pipeline bubble, batch ramp "
                           "and LR schedule");
  mtnlg::PlanOptions plan;
  bool json = false, no_data_check = false;
  app.add_option("--world-size", plan.world_size,
                 "With --dry-run: plan for N ranks (parallel.data = N / (tensor x pipeline))")
      ->needs(dry)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_flag("--json", json, "With --dry-run: print the plan as one JSON object")->needs(dry);
  app.add_flag("--no-data-check", no_data_check,
               "With --dry-run: plan without opening the data (by default every data.blend "
               "prefix's .idx and .bin are opened and counted, and a missing or damaged one is "
               "exit 4 naming it: caught before a job queues)")
      ->needs(dry);
  std::string gpu = "a100";
  app.add_option("--gpu", gpu,
                 "With --dry-run: the GPU planned for, a100 (80 GiB, 312 bf16 / 156 TF32 peak "
                 "TFLOP/s), h100 (80 GiB, 989 / 494) or h200 (141 GiB, 989 / 494): the memory "
                 "limit and the peak behind the days to train, unless --gpu-memory-gb or "
                 "--peak-tflops say otherwise")
      ->needs(dry)
      ->check(CLI::IsMember({"a100", "h100", "h200"}))
      ->capture_default_str();
  auto* memory_flag =
      app.add_option("--gpu-memory-gb", plan.gpu_memory_gb,
                     "With --dry-run: memory of one GPU in GiB, the limit the plan is checked "
                     "against (default: --gpu's)")
          ->needs(dry)
          ->check(finite_positive());
  app.add_option("--iteration-time", plan.iteration_time_s,
                 "With --dry-run: measured seconds per iteration at the full batch; prints the "
                 "model TFLOP/s per GPU")
      ->needs(dry)
      ->check(finite_positive());
  auto* peak_flag = app.add_option("--peak-tflops", plan.peak_tflops,
                                   "With --dry-run: peak TFLOP/s of one GPU for the days to "
                                   "train (default: --gpu's, for the recipe's precision)")
                        ->needs(dry)
                        ->check(finite_positive());
  app.add_option("--utilization", plan.utilization,
                 "With --dry-run: fraction of the peak the run achieves, for the days to train")
      ->needs(dry)
      ->check(finite_fraction())
      ->capture_default_str();
  std::string device;
  app.add_option("--device", device,
                 "auto, cpu or cuda: where to train (overrides the recipe's device key; auto, "
                 "the default, takes a GPU when this build has CUDA and one is visible). Each "
                 "rank takes GPU local_rank % visible GPUs; cuda without a GPU is exit 3")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--threads", threads,
                 "CPU threads for the CPU backend (default: all cores, shared among a node's "
                 "ranks); with --dry-run, the threads a CPU plan's bf16 weight copies are sized "
                 "for (default: all cores)")
      ->check(mtnlg::non_negative_number());
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  // Before anything runs: may re-execute this process with OMP_WAIT_POLICY=passive.
  if (!dry_run) mtnlg::reexec_for_openmp_wait_policy(argv, threads);

  try {
    mtnlg::init_logging(log_level);
    if (!device.empty()) overrides.push_back("device=" + device);  // after --set: it wins
    const mtnlg::Recipe recipe = mtnlg::load_recipe(config, overrides);
    if (dry_run) {
      mtnlg::DryRunRequest request;
      request.gpu = gpu;
      request.memory_given = memory_flag->count() > 0;
      request.peak_given = peak_flag->count() > 0;
      request.json = json;
      request.check_data = !no_data_check;
      request.threads = threads;
      return mtnlg::run_dry_run(recipe, plan, request, std::cout);
    }
    mtnlg::check_supported(recipe);  // before any rank connects to another
    // From here a stop signal ends the run at an iteration boundary, saved (exit 75).
    mtnlg::install_stop_signal_handlers();

    // One process, or one rank of a job started by a PMIx launcher (mpirun, srun --mpi=pmix).
    mtnlg::Runtime runtime = mtnlg::Runtime::init();
    mtnlg::init_logging(log_level, static_cast<int>(runtime.rank));
    if (const char* why = std::getenv("MTNLG_OPENMP_REEXEC"))
      spdlog::info(
          "OMP_WAIT_POLICY=passive: {} (OpenMP threads that spin would take the cores "
          "other ranks compute on)",
          why);
    mtnlg::Job job(std::move(runtime), recipe.parallel.tensor, recipe.parallel.pipeline,
                   recipe.parallel.data);
    // The device first: it decides what carries the groups (NCCL for GPU ranks; CPU ranks:
    // parallel.transport, by default shared memory within a node and TCP across nodes).
    const mtnlg::DeviceResolution where =
        mtnlg::resolve_device(recipe.device, job.runtime().local_rank);
    job.connect([&](const mtnlg::Topology& topology, mtnlg::Store& store) {
      return mtnlg::make_device_groups(where, topology, store,
                                       std::chrono::seconds(recipe.parallel.timeout_s),
                                       recipe.parallel.transport);
    });
    mtnlg::TrainerOptions options;
    options.hooks = hooks;
    options.local_rank = job.runtime().local_rank;
    options.device = &where;
    // Ranks sharing a node share its cores.
    options.threads = threads > 0
                          ? threads
                          : std::max<int>(1, static_cast<int>(std::thread::hardware_concurrency() /
                                                              job.runtime().local_world));
    if (job.multi_rank()) {
      options.topology = &job.topology();
      options.node = job.runtime().node;
      options.groups = &job.groups();
    }
    mtnlg::Trainer trainer(recipe, options);
    trainer.run();
    switch (trainer.stop_reason()) {
      case mtnlg::StopReason::kFinished:
        return 0;
      case mtnlg::StopReason::kTimeLimit:
        return mtnlg::kExitTryAgain;  // the recipe requires checkpoint.dir for this
      case mtnlg::StopReason::kSignal:
        return trainer.saved_at_stop() ? mtnlg::kExitTryAgain : 128 + trainer.stop_signal();
    }
    return 1;
  } catch (const mtnlg::Error& e) {
    spdlog::error("{}", e.what());
    return mtnlg::exit_status(e.code());
  } catch (const std::bad_alloc&) {
    spdlog::error(
        "out of memory: the recipe asks this rank for more memory than the machine has (the "
        "model and optimizer state, activations, or the data indices of a very long run); "
        "--dry-run prints the plan per rank: lower the model size, micro-batch or run length, or "
        "use more ranks");
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace mtnlg
