// The planner's memory prediction against the CPU backend's measured peak: a Trainer runs 2
// iterations of configs/tiny.yaml and configs/demo-cpu.yaml on a small synthetic corpus, and
// Backend::peak_bytes() must equal make_plan's per-rank total to the byte (one rank): the
// plan counts every tensor the CPU backend allocates, so any drift (a buffer re-allocated per
// micro-batch, a term the planner forgot) fails here.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "cmd/planner.h"
#include "cmd/trainer.h"
#include "core/backend.h"
#include "core/cpu/matmul_bf16.h"
#include "core/logging.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

using namespace mtnlg;

namespace {

void write_corpus(const std::string& prefix, int docs, int vocab) {
  IndexedDatasetBuilder builder(prefix, TokenType::kUInt16);
  std::mt19937 rng(3);
  for (int d = 0; d < docs; ++d) {
    std::vector<int32_t> doc(40 + rng() % 60);
    for (auto& t : doc) t = static_cast<int32_t>(rng() % vocab);
    builder.add_document(doc);
  }
  builder.finish();
}

void check_prediction(const std::string& config, std::vector<std::string> sets) {
  init_logging("warn");
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 200, 512);
  sets.insert(
      sets.end(),
      {"data.blend=[{prefix: " + dir.file("corpus") + ", weight: 1}]", "data.split=[1, 0, 0]",
       "schedule.train_iters=2", "schedule.train_tokens=0", "schedule.decay_tokens=0",
       "schedule.warmup_tokens=0", "eval.interval=0", "data.cache_dir=" + dir.file("cache")});
  const Recipe recipe = load_recipe(test::source_path("configs/" + config), sets);
  PlanOptions options;
  options.device = Device::kCPU;  // the backend this test measures
  const Plan plan = make_plan(recipe, options);
  Trainer trainer(recipe, TrainerOptions{2, false});
  const auto stats = trainer.run();
  REQUIRE(stats.size() == 2);
  const int64_t measured = trainer.backend().peak_bytes();
  INFO(config << ": measured peak " << measured << " B, planned " << plan.worst().memory.total()
              << " B");
  CHECK(plan.worst().memory.total() == measured);
  // Both iterations report the peak so far; the whole plan is allocated by the end of the first.
  CHECK(stats[0].peak_memory_bytes == measured);
  CHECK(stats[1].peak_memory_bytes == measured);
  CHECK(stats[1].tflops_per_device > 0.0);
  // Nothing is allocated per iteration: after the run everything the plan counts is still
  // allocated (in bf16 on the CPU that includes the GEMM weights' blocked copies).
  // (None where OpenBLAS's kernel packs the bf16 weights as it reads them: AVX2 CPUs.)
  if (recipe.precision == Precision::kBF16)
    CHECK((plan.worst().weight_copy_bytes > 0) == !cpu::MatmulBf16::openblas_kernel_default());
  if (recipe.precision == Precision::kFP8) CHECK(plan.worst().fp8_cast_bytes > 0);
  CHECK(trainer.backend().live_bytes() == measured);
}

}  // namespace

TEST_CASE("planned memory matches the measured peak: tiny") {
  check_prediction("tiny.yaml", {});
}

TEST_CASE("planned memory matches the measured peak: tiny with activation checkpointing") {
  check_prediction("tiny.yaml", {"parallel.activation_checkpointing=true"});
}

TEST_CASE("planned memory matches the measured peak: demo-cpu") {
  check_prediction("demo-cpu.yaml", {});
}

TEST_CASE("the CPU backend counts live and peak bytes - freed tensors uncount") {
  auto be = make_cpu_backend(1);
  CHECK(be->live_bytes() == 0);
  {
    Tensor a = be->alloc({10, 10}, DType::kF32);  // 400 B
    Tensor b = be->alloc({5}, DType::kF64);       // 40 B
    CHECK(be->live_bytes() == 440);
    Tensor view = a.view({100});  // a view shares the storage: no new bytes
    CHECK(be->live_bytes() == 440);
  }
  CHECK(be->live_bytes() == 0);
  CHECK(be->peak_bytes() == 440);
  Tensor c = be->alloc({3}, DType::kI32);
  CHECK(be->peak_bytes() == 440);
  be->reset_peak();
  CHECK(be->peak_bytes() == 12);
  // A tensor that outlives its backend still frees cleanly.
  Tensor d = be->alloc({4}, DType::kF32);
  be.reset();
  d = Tensor();
  CHECK_FALSE(d.defined());
}

// bf16: bf16 weights and activations, fp32 main gradients, masters, moments and LayerNorm
// statistics (Megatron's count), to the byte.
TEST_CASE("planned memory matches the measured peak: tiny in bf16") {
  check_prediction("tiny.yaml", {"precision=bf16"});
}

TEST_CASE("planned memory matches the measured peak: tiny in bf16 with activation checkpointing") {
  check_prediction("tiny.yaml", {"precision=bf16", "parallel.activation_checkpointing=true"});
}

TEST_CASE("planned memory matches the measured peak: demo-cpu in bf16") {
  check_prediction("demo-cpu.yaml", {"precision=bf16"});
}

// fp8: bf16's memory, the linear layers' cast buffers instead of their weight copies
// (StagePlan::fp8_cast_bytes), to the byte.
TEST_CASE("planned memory matches the measured peak: tiny in fp8 (bf16 and fp8 cast buffers)") {
  check_prediction("tiny.yaml", {"precision=fp8"});
  check_prediction("tiny.yaml", {"precision=fp8", "parallel.activation_checkpointing=true"});
}
