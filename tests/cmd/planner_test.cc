// The planner behind --dry-run: the paper's figures, and every field on configs/tiny.yaml
// against arithmetic written out here by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "cmd/dry_run.h"
#include "cmd/planner.h"
#include "core/cuda/attention_workspace.h"
#include "core/cuda/column_sum_plan.h"
#include "core/cuda/device_overheads.h"
#include "core/cuda/gemm_fp8_plan.h"
#include "test_util.h"

using namespace mtnlg;

// The CUDA backend's own scratch, written out: sum_squares' 1024 partials in double, the
// deferred id checks' 64 words of 8 bytes, abs_max's 4-byte word.
constexpr int64_t kBackendScratch = 1024 * 8 + 64 * 8 + 8 + 4;
using mtnlg::test::ScopedEnv;

namespace {

Recipe recipe(const std::string& config, std::vector<std::string> sets = {}) {
  return load_recipe(test::source_path("configs/" + config), sets);
}

PlanOptions world(int64_t n, double iteration_time = 0.0) {
  PlanOptions o;
  o.world_size = n;
  o.iteration_time_s = iteration_time;
  return o;
}

}  // namespace

TEST_CASE("530B: about 530B parameters and the paper's FLOPs per iteration") {
  const Recipe r = recipe("530b.yaml");
  const Plan p = make_plan(r, world(2240));
  // 105 layers x (12 h^2 + 13 h) + V_pad h + P h + 2h, h = 20480, V_pad = 51200, P = 2048:
  // 105 x 5,033,431,040 + 1,048,576,000 + 41,943,040 + 40,960 = 529,600,819,200.
  CHECK(p.parameters == 529'600'819'200);
  CHECK(p.padded_vocab == 51200);
  // F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), B = 1920, s = 2048, l = 105, h = 20480, V = 51200.
  const double B = 1920, s = 2048, l = 105, h = 20480, V = 51200;
  const double F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  CHECK(p.flops_per_iteration == Approx(F).epsilon(1e-12));
  CHECK(F == Approx(1.6927e19).epsilon(1e-4));
  CHECK(p.flops_per_iteration_no_recompute ==
        Approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))).epsilon(1e-12));
  // 8 x 35 x 8: m = 1920 / (1 x 8) = 240 micro-batches, bubble 34 / 274.
  CHECK(p.data == 8);
  CHECK(p.micro_batches == 240);
  CHECK(p.bubble_fraction == Approx(34.0 / 274.0));
}

TEST_CASE("530B: the paper's TFLOP/s per GPU at 2240 - 2800 and 3360 GPUs") {
  const Recipe r = recipe("530b.yaml");
  // The paper's Table 2: 60.1 s -> 126, 50.2 s -> 121, 44.4 s -> 113 TFLOP/s per GPU.
  const struct {
    int64_t gpus;
    double seconds, tflops;
    int64_t data;
  } rows[] = {{2240, 60.1, 126, 8}, {2800, 50.2, 121, 10}, {3360, 44.4, 113, 12}};
  for (const auto& row : rows) {
    const Plan p = make_plan(r, world(row.gpus, row.seconds));
    INFO(row.gpus << " GPUs: " << *p.tflops_per_gpu << " TFLOP/s");
    CHECK(p.data == row.data);
    CHECK(p.world == row.gpus);
    REQUIRE(p.tflops_per_gpu.has_value());
    CHECK(*p.tflops_per_gpu == Approx(row.tflops).margin(1.0));
    // e.g. 1.6927e19 / (60.1 s x 2240) = 125.7e12.
    CHECK(*p.tflops_per_gpu ==
          Approx(p.flops_per_iteration / (row.seconds * static_cast<double>(row.gpus)) / 1e12));
  }
}

TEST_CASE("530B: the plan fits 80 GiB - stage 0 holds 35 micro-batches in flight") {
  const Plan p = make_plan(recipe("530b.yaml"), world(2240));
  REQUIRE(p.stages.size() == 35);
  CHECK(p.stages[0].in_flight == 35);  // min(35 - 0, 240)
  CHECK(p.stages[34].in_flight == 1);  // min(35 - 34, 240)
  CHECK(p.stages[0].embedding);
  CHECK(p.stages[34].head);
  CHECK(p.worst_stage == 0);
  CHECK(p.fits);
  // Each rank holds 3 layers / 8 plus the embeddings: about 1.9B parameters.
  // Per layer: split 12 h^2 + 3h + f over 8; replicated two LayerNorms 4h + two biases 2h.
  CHECK(p.stages[17].parameters ==
        3 * (12 * 20480LL * 20480 / 8 + (3 * 20480 + 81920) / 8 + 6 * 20480));
  // A smaller GPU does not: the error names the worst rank.
  PlanOptions small = world(2240);
  small.gpu_memory_gb = 16;
  const Plan q = make_plan(recipe("530b.yaml"), small);
  CHECK_FALSE(q.fits);
  CHECK(q.worst_stage == 0);
}

TEST_CASE("530B: iterations counted with the batch ramp match Megatron's rule") {
  const Recipe r = recipe("530b.yaml");
  // Megatron-LM's RampupBatchsizeNumMicroBatches, in tokens: 59 increments of 32, one every
  // 12e9 / 59 tokens; the batch is 1920 once more than 12e9 tokens are consumed.
  const double per_increment = 12e9 / 59.0;
  int64_t iterations = 0, tokens = 0;
  while (tokens < 270'000'000'000) {
    int64_t batch = 1920;
    if (tokens <= 12'000'000'000)
      batch = std::min<int64_t>(1920, 32 + 32 * static_cast<int64_t>(tokens / per_increment));
    tokens += batch * 2048;
    ++iterations;
  }
  const Plan p = make_plan(r, world(2240));
  CHECK(p.iterations == iterations);
  CHECK(p.tokens == tokens);
  CHECK(p.iterations > 68'665);  // the full-batch count; the ramp's small batches add more
  CHECK(ramp_global_batch(r.batch, 0) == 32);
  CHECK(ramp_global_batch(r.batch, 203'389'830) == 32);  // just before 12e9 / 59
  CHECK(ramp_global_batch(r.batch, 203'389'831) == 64);  // just after
  CHECK(ramp_global_batch(r.batch, 12'000'000'000) == 1920);
  CHECK(ramp_global_batch(r.batch, 11'999'999'999) == 1888);
}

TEST_CASE("a --world-size that does not divide is an error naming the numbers") {
  const Recipe r = recipe("530b.yaml");
  try {
    make_plan(r, world(2241));
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(std::string(e.what()).find("2241") != std::string::npos);
    CHECK(std::string(e.what()).find("280") != std::string::npos);  // 8 x 35
  }
  // 1960 = 280 x 7: data 7 does not divide the global batch 1920.
  try {
    make_plan(r, world(1960));
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.context() == "batch.global_batch_size");
    CHECK(std::string(e.what()).find("1920") != std::string::npos);
  }
}

TEST_CASE("tiny: every field by hand") {
  // configs/tiny.yaml: l = 2, h = 64, a = 4, f = 4h = 256, s = 32, P = 32, V = 512 (already a
  // multiple of 128), micro b = 2, global 4, fp32, no checkpointing, one rank.
  const Recipe r = recipe("tiny.yaml");
  const Plan p = make_plan(r, PlanOptions{});
  CHECK(p.world == 1);
  CHECK(p.micro_batches == 2);  // 4 / (2 x 1)
  CHECK(p.bubble_fraction == 0.0);
  // Parameters: word 512 x 64 = 32768, positions 32 x 64 = 2048, final LN 128, per layer
  // ln1 128 + qkv 192x64+192 = 12480 + dense 4096+64 = 4160 + ln2 128 + fc1 256x64+256 = 16640
  // + fc2 64x256+64 = 16448 = 49984.
  const int64_t params = 32768 + 2048 + 2 * 49984 + 128;
  CHECK(params == 134912);
  // The CUDA attention scratch: 4 heads x 32^2 x (4 fp32 scores + 4 their gradient + 4 dropped
  // probabilities, the operand of dV's product, + 4 softmax gradient).
  CHECK(p.cuda_attention_scratch_bytes == 4 * 32 * 32 * 16);
  CHECK(p.parameters == params);
  REQUIRE(p.stages.size() == 1);
  const StagePlan& st = p.stages[0];
  CHECK(st.parameters == params);
  CHECK(st.in_flight == 1);
  // Memory, fp32: weights 4 B, grads 4 B, no master copy, moments 8 B per parameter.
  CHECK(st.memory.weights == 4 * params);
  CHECK(st.memory.gradients == 4 * params);
  CHECK(st.memory.master_weights == 0);
  CHECK(st.memory.adam_moments == 8 * params);
  // One layer saves, with rows = b s = 64: ln1_out, h1, ln2_out 64x64 each, four statistics 64
  // each, qkv 64x192, attn_out 64x64, fc1_out and act_out 64x256, the softmax's log-sum-exp
  // 2x4x32 (no [s, s] probabilities): 64 x (3x64 + 4) + 64 x (192 + 64 + 512) + 256 = 12544 +
  // 49152 + 256 = 61952 elements.
  CHECK(layer_activation_elements(r, 2, 1) == 61952);
  // Per micro-batch: 3 residual tensors 3 x 4096, 2 layers, lnf out 4096 + mean/rstd 128
  // floats, plus tokens and targets 64 int32 each: (12288 + 123904 + 4224) x 4 + 512.
  CHECK(st.activation_bytes_full == (12288 + 2 * 61952 + 4224) * 4 + 512);
  CHECK(st.activation_bytes_full == 562176);
  // Checkpointed: only the layer inputs per micro-batch: (12288 + 4224) x 4 + 512 (the one
  // recompute buffer is per stage); not counted here, as checkpointing is off.
  CHECK(st.activation_bytes_checkpointed == 66560);
  CHECK(st.recompute_bytes == 0);
  CHECK(st.memory.activations == 562176);
  // Workspace: logits 64 x 512 floats = 131072 B; scratch dh, dln, dres 3 x 4096, dattn
  // 4096, dqkv 12288, dact 16384 floats = 45056 x 4 = 180224 B; the step's loss sum, one f64.
  CHECK(st.logits_bytes == 131072);
  CHECK(st.scratch_bytes == 180224);
  CHECK(st.memory.workspace == 311296 + 8);
  CHECK(st.memory.total() == 539648 + 539648 + 1079296 + 562176 + 311304);
  CHECK(st.memory.total() == 3032072);
  CHECK(st.memory.largest() == "adam_moments");
  CHECK(p.fits);
  // FLOPs: 96 x 4 x 32 x 2 x 64^2 = 100663296, times (1 + 32/384 + 512/(16x2x64)) = 4/3.
  CHECK(p.flops_per_iteration == Approx(134217728.0).epsilon(1e-12));
  // Without recompute: 72 x 4 x 32 x 2 x 64^2 = 75497472, times (1 + 1/12 + 1/3) = 17/12.
  CHECK(p.flops_per_iteration_no_recompute == Approx(106954752.0).epsilon(1e-12));
  CHECK(p.flops_per_token == Approx(106954752.0 / 128));  // no checkpointing: no recompute
  // 50 iterations x 128 tokens; the schedule decays over the run: decay_tokens = 6400.
  CHECK(p.iterations == 50);
  CHECK(p.tokens == 6400);
  REQUIRE(p.schedule.size() == 5);  // warmup end, 25/50/75/100%
  const double lr = 3e-3, pi = std::numbers::pi;
  const auto cosine = [&](double t) {
    return 0.5 * lr * (std::cos(pi * (t - 256) / (6400 - 256)) + 1);
  };
  const double want_tokens[] = {256, 1600, 3200, 4800, 6400};
  const double want_lr[] = {lr, cosine(1600), cosine(3200), cosine(4800), 0.0};
  for (size_t i = 0; i < 5; ++i) {
    CHECK(p.schedule[i].tokens == want_tokens[i]);
    CHECK(p.schedule[i].global_batch == 4);
    CHECK(p.schedule[i].micro_batches_per_rank == 2.0);
    CHECK(p.schedule[i].lr == Approx(want_lr[i]).margin(1e-15));
  }
  CHECK(p.schedule[0].label == "warmup end");
  CHECK_FALSE(p.tflops_per_gpu.has_value());
  // With times: 134217728 FLOPs in 0.5 s on one device = 2.68e-4 TFLOP/s; days at 1 TFLOP/s
  // x 0.5: 6400 tokens x 835584 FLOPs / 0.5e12 / 86400.
  PlanOptions o;
  o.iteration_time_s = 0.5;
  o.peak_tflops = 1.0;
  o.utilization = 0.5;
  const Plan t = make_plan(r, o);
  CHECK(*t.tflops_per_gpu == Approx(134217728.0 / 0.5 / 1e12));
  CHECK(*t.days_at_iteration_time == Approx(50 * 0.5 / 86400));
  CHECK(*t.days_to_train == Approx(6400 * 835584.0 / 0.5e12 / 86400));
}

TEST_CASE("tiny on 2 x 2 x 2 - bf16 - ZeRO-1 - checkpointing: per-stage fields by hand") {
  // l = 4 (2 per stage), tp 2, pp 2, dp 2, global 8: m = 8 / (2 x 2) = 2.
  const Recipe r =
      recipe("tiny.yaml", {"model.num_layers=4", "parallel.tensor=2", "parallel.pipeline=2",
                           "parallel.data=2", "parallel.zero_stage=1", "precision=bf16",
                           "parallel.activation_checkpointing=true", "batch.global_batch_size=8"});
  const Plan p = make_plan(r, PlanOptions{});
  CHECK(p.world == 8);
  CHECK(p.micro_batches == 2);
  CHECK(p.bubble_fraction == Approx(1.0 / 3.0));
  CHECK(p.padded_vocab == 512);  // multiple of 128 x 2
  // bf16 at head size 16: cuDNN's attention (the default), called a sequence at a time (tp 2 with
  // attention dropout): its backward's rowsum(dO O) in fp32, 2 heads per tensor rank x 32, and its
  // deterministic dS, 2 bytes an element of [1, 2, 64, 64] (s padded to 64).
  CHECK(p.micro_batch == 2);
  CHECK(p.cuda_attention_scratch_bytes == 1 * 2 * 32 * 4 + 1 * 2 * 64 * 64 * 2);
  CHECK(p.parameters == 32768 + 2048 + 4 * 49984 + 128);
  // One layer's share on a tensor rank: replicated ln1 128, dense bias 64, ln2 128, fc2 bias 64;
  // split qkv 12288/2 + 192/2, dense 4096/2, fc1 16384/2 + 256/2, fc2 16384/2 = 25184.
  const int64_t layer = 128 + 64 + 128 + 64 + 6144 + 96 + 2048 + 8192 + 128 + 8192;
  CHECK(layer == 25184);
  REQUIRE(p.stages.size() == 2);
  const StagePlan& s0 = p.stages[0];
  const StagePlan& s1 = p.stages[1];
  // Stage 0: word embeddings 512 x 64 / 2 + positions 2048 + 2 layers; stage 1: 2 layers +
  // final LN 128 + the head's copy of the word embeddings 16384.
  CHECK(s0.parameters == 16384 + 2048 + 2 * layer);
  CHECK(s1.parameters == 2 * layer + 128 + 16384);
  CHECK(s0.optimizer_shard == 68800 / 2);
  CHECK(s1.optimizer_shard == 66880 / 2);
  // bf16 weights 2 B; fp32 main gradients 4 B; fp32 master 4 B and moments 8 B of the ZeRO-1
  // shard (Megatron's bf16 accounting).
  CHECK(s0.memory.weights == 2 * 68800);
  CHECK(s0.memory.gradients == 4 * 68800);
  CHECK(s0.memory.master_weights == 4 * 34400);
  CHECK(s0.memory.adam_moments == 8 * 34400);
  CHECK(s1.memory.weights == 2 * 66880);
  CHECK(s1.memory.adam_moments == 8 * 33440);
  // 1F1B: stage 0 holds min(2 - 0, 2) = 2 micro-batches, stage 1 min(1, 2) = 1.
  CHECK(s0.in_flight == 2);
  CHECK(s1.in_flight == 1);
  // One layer on a tensor rank, rows 64: 64 x (3x64 + 4) + 64 x (4x64 + 2x256) / 2 +
  // 2 x (4/2) x 32 = 12544 + 24576 + 128 = 37248 elements.
  CHECK(layer_activation_elements(r, 2, 2) == 37248);
  // In bytes: bf16 but the 4 x 64 LayerNorm statistics and the 128 log-sum-exps, which stay
  // fp32: (37248 - 384) x 2 + 384 x 4 = 75264.
  CHECK(layer_activation_bytes(r, 2, 2) == 75264);
  // Stage 0 per micro-batch, checkpointed: residual 3 x 4096, bf16, + tokens; the layer buffer
  // is the stage's one recompute buffer, 75264 B, in the workspace.
  CHECK(s0.activation_bytes_checkpointed == 12288 * 2 + 256);
  CHECK(s0.activation_bytes_full == 12288 * 2 + 2 * 75264 + 256);
  CHECK(s0.memory.activations == 2 * 24832);
  CHECK(s0.recompute_bytes == 75264);
  // Stage 1: + targets 256 B + lnf out 4096 x 2 and its fp32 mean/rstd 128 x 4 + the
  // vocab-parallel cross entropy's f64 row max and [2, rows] sums, 3 x 64 x 8.
  CHECK(s1.memory.activations == 12288 * 2 + 256 + 4096 * 2 + 128 * 4 + 1536);
  // Scratch: (3 x 4096 + 64 x (64 + 192 + 256) / 2) x 2 = 57344; logits 64 x 256 x 2 = 32768;
  // recompute 75264; one pipeline receive buffer [2, 32, 64] bf16 each (stage 0 the gradient
  // from stage 1, stage 1 the activation from stage 0) 8192; ZeRO-1's partition of the summed
  // fp32 gradients, S = 34400 and 33440 (the buffer, 68800 and 66880 elements, divides by 2).
  CHECK(s0.receive_bytes == 8192);
  CHECK(s1.receive_bytes == 8192);
  CHECK(s0.reduce_scatter_bytes == 4 * 34400);
  CHECK(s1.reduce_scatter_bytes == 4 * 33440);
  // Each stage's loss sum: 8 (the first stage's stays zero).
  CHECK(s0.memory.workspace == 57344 + 75264 + 8192 + 137600 + 8);
  CHECK(s1.memory.workspace == 57344 + 32768 + 75264 + 8192 + 133760 + 8);
  // Weights + master (2 B + 4 B of half the parameters) and gradients + moments (4 B + 8 B of
  // half): 2 x weights + 2 x gradients.
  CHECK(s0.memory.total() == 2 * 137600 + 2 * 275200 + 49664 + 278408);
  CHECK(s1.memory.total() == 2 * 133760 + 2 * 267520 + 35072 + 307336);
  CHECK(s0.reduce_staging_bytes == 0);
  CHECK(p.worst_stage == 0);
  CHECK(s0.memory.largest() == "workspace");
  // The limit in GiB against the device total: the tensors' 1153672 B and, on a GPU, the
  // overheads (below); both stages are ends of the pipeline, with the same NCCL communicators.
  CHECK(p.worst_device_stage == 0);
  const int64_t device_total = 1153672 + s0.device.total();
  CHECK(s0.device_total() == device_total);
  PlanOptions o;
  o.gpu_memory_gb = static_cast<double>(device_total) / (1024.0 * 1024.0 * 1024.0);
  CHECK(make_plan(r, o).fits);
  // grad_reduce_dtype bf16: the bf16 copies of the padded buffer and of the partition, 2 B each
  // (parallel/grad_sync.h), in the workspace.
  Recipe r16 = r;
  r16.parallel.grad_reduce_dtype = Precision::kBF16;
  const Plan p16 = make_plan(r16, PlanOptions{});
  CHECK(p16.stages[0].reduce_staging_bytes == 2 * (68800 + 34400));
  CHECK(p16.stages[1].reduce_staging_bytes == 2 * (66880 + 33440));
  CHECK(p16.stages[0].memory.workspace == s0.memory.workspace + 2 * (68800 + 34400));
  o.gpu_memory_gb = static_cast<double>(device_total - 1) / (1024.0 * 1024.0 * 1024.0);
  CHECK_FALSE(make_plan(r, o).fits);
  // Checkpointing on: the FLOPs per token include the recompute.
  CHECK(p.flops_per_token == Approx(p.flops_per_iteration / (8 * 32)));
}

TEST_CASE("tiny with a batch ramp: iterations - tokens and the schedule table") {
  // start 2, increment 2, global 4: n = 1 step, taken at 256 tokens. Iterations of 2 x 32 = 64
  // tokens at 0, 64, 128, 192; from 256 on 4 x 32 = 128 tokens.
  const Recipe r = recipe(
      "tiny.yaml", {"batch.rampup.start=2", "batch.rampup.increment=2", "batch.rampup.tokens=256",
                    "schedule.train_iters=0", "schedule.train_tokens=1000"});
  const Plan p = make_plan(r, PlanOptions{});
  // 4 ramp iterations (256 tokens), then ceil((1000 - 256) / 128) = 6 more: 10, 1024 tokens.
  CHECK(p.iterations == 10);
  CHECK(p.tokens == 1024);
  CHECK(ramp_global_batch(r.batch, 255) == 2);
  CHECK(ramp_global_batch(r.batch, 256) == 4);
  // Rows: ramp step 0/1 at 0, ramp step 1/1 and warmup end at 256, then 25% ... 100% of 1024.
  REQUIRE(p.schedule.size() == 7);
  CHECK(p.schedule[0].label == "ramp step 0/1");
  CHECK(p.schedule[0].global_batch == 2);
  CHECK(p.schedule[0].micro_batches_per_rank == 1.0);
  CHECK(p.schedule[1].tokens == 256);
  CHECK(p.schedule[1].global_batch == 4);
  CHECK(p.schedule[3].tokens == 256);  // 25% of 1024
  CHECK(p.schedule[6].tokens == 1024);
}

TEST_CASE("dry-run output: the text has the layout line - the JSON the contract keys") {
  const Recipe r = recipe("530b.yaml");
  std::ostringstream text, json;
  print_dry_run(r, world(2240, 60.1), text);
  CHECK(text.str().find("8 x 35 x 8 = 2240 ranks") != std::string::npos);
  CHECK(text.str().find("TFLOP/s per GPU       125.7") != std::string::npos);
  print_dry_run_json(r, world(2240, 60.1), json);
  const std::string j = json.str();
  CHECK(j.front() == '{');
  CHECK(j.find('\n') == j.size() - 1);  // one line
  for (const char* key :
       {"\"parameters\": 529600819200", "\"flops_per_iteration\": ", "\"tflops_per_gpu\": ",
        "\"memory_per_rank_gb\": ", "\"fits\": true",
        "\"iterations\": ", "\"bubble_fraction\": ", "\"cuda_attention_kernels\": \"cudnn\""})
    CHECK(j.find(key) != std::string::npos);
  // Head size 160: cuDNN's attention by default (a multiple of 8 up to 256).
  CHECK(text.str().find("attention kernels on the GPU: cudnn;") != std::string::npos);
  std::ostringstream no_time;
  print_dry_run_json(r, world(2240), no_time);
  CHECK(no_time.str().find("tflops_per_gpu") == std::string::npos);
}

TEST_CASE("communication per iteration: tiny on 2 x 2 x 2 by hand") {
  // l = 2 (1 per stage), h = 64, s = 32, V = 512, micro 1, global 8: m = 8 / (1 x 2) = 4. One
  // [b, s, h] fp32 tensor is a = 32 x 64 x 4 = 8192 B; an all-reduce over 2 ranks counts
  // 2(2-1)/2 = 1x its bytes.
  const std::vector<std::string> layout = {"parallel.tensor=2", "parallel.pipeline=2",
                                           "parallel.data=2", "parallel.micro_batch_size=1",
                                           "batch.global_batch_size=8"};
  const int64_t a = 8192, m = 4;
  // Local parameters (the 2 x 2 x 2 test above): stage 0 word 16384 + positions 2048 + one
  // layer 25184; stage 1 one layer + final LN 128 + the tied copy 16384.
  const int64_t p0 = 16384 + 2048 + 25184, p1 = 25184 + 128 + 16384;
  const int64_t wte = 256 * 64 * 4;  // the word embeddings' gradient [V/tp, h]
  SECTION("plain data parallel") {
    const Plan p = make_plan(recipe("tiny.yaml", layout), PlanOptions{});
    REQUIRE(p.micro_batches == m);
    const CommBytes s0 = communication_per_iteration(recipe("tiny.yaml", layout), p, 0);
    const CommBytes s1 = p.stages[1].communication;
    // Tensor, per micro-batch: stage 0 the embedding's sum + 4 per layer; stage 1 4 per layer
    // + dLN_f + the cross entropy's row max (32 f64) and sum-exp and target logit (64 f64);
    // per iteration the grad norm's f64.
    CHECK(s0.tensor == m * (a + 4 * a) + 8);
    CHECK(s1.tensor == m * (4 * a + a + 32 * 8 + 64 * 8) + 8);
    CHECK(s0.tensor == 163848);
    CHECK(s1.tensor == 166920);
    // Pipeline: stage 0 sends activations forward, stage 1 gradients back; loss + norm f64s.
    CHECK(s0.pipeline == m * a + 2 * 8);
    CHECK(s1.pipeline == m * a + 2 * 8);
    CHECK(s0.embedding == wte);
    CHECK(s1.embedding == wte);
    // Data: the stage's fp32 gradients + the loss.
    CHECK(s0.data == 4 * p0 + 8);
    CHECK(s1.data == 4 * p1 + 8);
    CHECK(s0.world == 0);
    CHECK(s0.total() == 163848 + 32784 + 65536 + 174472);
    CHECK(s0.total() == p.stages[0].communication.total());
    std::ostringstream json;
    print_dry_run_json(recipe("tiny.yaml", layout), PlanOptions{}, json);
    CHECK(json.str().find("\"communication\": [{\"stage\": 0, \"tensor\": 163848, \"pipeline\": "
                          "32784, \"data\": 174472, \"embedding\": 65536, \"total\": 436640}") !=
          std::string::npos);
  }
  SECTION("ZeRO-1") {
    auto sets = layout;
    sets.push_back("parallel.zero_stage=1");
    const Plan p = make_plan(recipe("tiny.yaml", sets), PlanOptions{});
    const CommBytes s0 = p.stages[0].communication, s1 = p.stages[1].communication;
    // Reduce-scatter + all-gather of the (even, so unpadded) gradients, 1/2 each, the two
    // partial squares (2 f64) and the loss; stage 1 leaves its tied embedding copy out of the
    // partition's squares, which costs nothing more.
    CHECK(s0.data == 2 * (4 * p0 / 2) + 16 + 8);
    CHECK(s1.data == 2 * (4 * p1 / 2) + 16 + 8);
    CHECK(s0.tensor == 163848);
    CHECK(s1.tensor == 166920);
  }
}

TEST_CASE("communication per iteration: one rank - dp 3 rounding and tp 4 recompute by hand") {
  // One rank sends nothing.
  const Plan one = make_plan(recipe("tiny.yaml"), PlanOptions{});
  CHECK(one.stages[0].communication.total() == 0);
  // dp 3, ZeRO-1, global 6, micro 2: 134912 parameters pad to 3 x 44971 = 134913, 539652 B;
  // reduce-scatter and all-gather 2/3 of it each (359768), the squares 2 x 2 x 16 / 3 -> 21 B,
  // the loss 2 x 2 x 8 / 3 -> 10 B (each call rounded down).
  const Recipe z = recipe("tiny.yaml", {"parallel.zero_stage=1", "batch.global_batch_size=6"});
  const Plan p3 = make_plan(z, world(3));
  CHECK(p3.stages[0].communication.data == 2 * 359768 + 21 + 10);
  CHECK(p3.stages[0].communication.tensor == 0);
  // Without ZeRO-1: 2 x 2/3 x 539648 = 719530.67 -> 719530, + 10.
  const Plan a3 = make_plan(recipe("tiny.yaml", {"batch.global_batch_size=6"}), world(3));
  CHECK(a3.stages[0].communication.data == 719530 + 10);
  // tp 4 with recompute: m = 4 / 2 = 2; a = 2 x 32 x 64 x 4 = 16384 B, 6/4 of it per
  // all-reduce = 24576; per micro-batch 2 layers x 6 (2 more forward) + embedding + dLN_f, and
  // the cross entropy's 64 and 128 f64 (768 and 1536); the norm's f64 adds 12.
  const Plan tp4 = make_plan(
      recipe("tiny.yaml", {"parallel.activation_checkpointing=true", "parallel.tensor=4"}),
      world(4));
  REQUIRE(tp4.tensor == 4);
  REQUIRE(tp4.micro_batches == 2);
  CHECK(tp4.stages[0].communication.tensor ==
        2 * (2 * 6 * 24576 + 24576 + 24576 + 768 + 1536) + 12);
  CHECK(tp4.stages[0].communication.data == 0);
  CHECK(tp4.stages[0].communication.pipeline == 0);
}

TEST_CASE(
    "CUDA attention scratch - the FA2-style kernels where they apply, else one sequence's scores") {
  // Blocked: 2 heads x 32^2 x (4 + 4 + 2 + 2) (fp32 scores and their gradient, the (dropped)
  // probabilities for dV's product, the softmax gradient), with or without dropout, whatever
  // the micro-batch; in fp32, 4 bytes for each.
  CHECK(cuda_attention_scratch(4, 2, 32, 16, 2, true, AttentionKernels::kBlocked) ==
        2 * 32 * 32 * 12);
  CHECK(cuda_attention_scratch(4, 2, 32, 16, 2, false, AttentionKernels::kBlocked) ==
        2 * 32 * 32 * 12);
  CHECK(cuda_attention_scratch(4, 2, 32, 16, 4, false, AttentionKernels::kBlocked) ==
        2 * 32 * 32 * 16);
  // The FA2-style kernels: the per-row delta at head sizes 64 and 128, else the blocked scratch.
  // With dropout, the keep bits besides: one 32-bit word per row and 32 keys. With dS stored
  // (the default), dS^T after them from a 16-byte boundary: 2 bytes an element of [4, 2, 32, 32]
  // (rows a multiple of 8 already) and 64 elements of slack.
  using K = AttentionKernels;
  const AttentionChoice recompute{K::kFlash2, K::kFlash2, Flash2Dq::kRecompute};
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, false, recompute) == 4 * 2 * 32 * 4);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, true, recompute) ==
        4 * 2 * 32 * 4 + 4 * 2 * 32 * 1 * 4);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, false, K::kFlash2) ==
        4 * 2 * 32 * 4 + (4 * 2 * 32 * 32 + 64) * 2);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, true, K::kFlash2) ==
        4 * 2 * 32 * 4 + 4 * 2 * 32 * 1 * 4 + (4 * 2 * 32 * 32 + 64) * 2);
  CHECK(cuda_attention_scratch(4, 2, 32, 16, 2, true, AttentionKernels::kFlash2) ==
        2 * 32 * 32 * 12);
  // One pass each: the larger of the passes'. The blocked forward's scores, probabilities and
  // dropped probabilities (4 + 2 + 2 bytes an element with dropout, 4 + 2 without) against the
  // FA2-style backward's delta and keep bits (recomputing dS) or those and dS^T (stored);
  // flash2's forward takes none, the blocked backward its usual.
  const AttentionChoice blocked_fwd{K::kBlocked, K::kFlash2, Flash2Dq::kRecompute};
  const AttentionChoice flash2_fwd{K::kFlash2, K::kBlocked};
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, true, blocked_fwd) == 2 * 32 * 32 * 8);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, false, blocked_fwd) == 2 * 32 * 32 * 6);
  CHECK(cuda_attention_scratch(64, 2, 32, 64, 2, false, blocked_fwd) == 64 * 2 * 32 * 4);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, true, AttentionChoice{K::kBlocked, K::kFlash2}) ==
        4 * 2 * 32 * 4 + 4 * 2 * 32 * 1 * 4 + (4 * 2 * 32 * 32 + 64) * 2);
  CHECK(cuda_attention_scratch(4, 2, 32, 64, 2, true, flash2_fwd) == 2 * 32 * 32 * 12);
}

// The column sums' scratch (core/cuda/column_sum_plan.h), the figures worked by hand for the 1.3B
// recipe's micro-batch of 4 x 2048 rows in bf16 (packs of 8 columns, 65536 threads aimed for):
// qkv's 6144 columns 85 chunks of 97 rows, fc1's 8192 64 chunks of 128, the residual's 2048 256
// chunks of 32 (LayerNorm: two terms, the largest); and the kernel scratch counts the larger of
// it and attention's, which flash2 without dropout (one float a row) leaves the smaller.
TEST_CASE("the column sums' scratch is planned and the kernel scratch takes the larger") {
  CHECK(column_sum_scratch_bytes(8192, 6144, 2, 4, 1) == 85 * 6144 * 4);
  CHECK(column_sum_scratch_bytes(8192, 8192, 2, 4, 1) == 64 * 8192 * 4);
  CHECK(column_sum_scratch_bytes(8192, 2048, 2, 4, 2) == 2 * 256 * 2048 * 4);
  CHECK(column_sum_scratch_bytes(1, 40, 2, 4, 1) == 1 * 40 * 4);  // fewer rows than chunks
  CHECK(column_sum_scratch_bytes(0, 40, 2, 4, 1) == 0);
  // Narrow sums over many rows: the chunks stop at kMaxColumnChunks (a grid's y is at most 65535).
  CHECK(column_sum_plan(1 << 20, 8, 8).chunks == kMaxColumnChunks);
  CHECK(column_sum_plan(1 << 20, 8, 8).rows_per_chunk == 256);
  // fp32 rows: packs of 4 columns.
  CHECK(column_sum_plan(8192, 2048, 4).chunks == 128);
  for (const int64_t rows : {1, 7, 97, 1000, 8192, 100000}) {
    const ColumnSumPlan c = column_sum_plan(rows, 6144, 8);
    INFO("rows " << rows);
    CHECK(c.chunks * c.rows_per_chunk >= rows);       // every row in a chunk
    CHECK((c.chunks - 1) * c.rows_per_chunk < rows);  // no empty chunk
  }
  const Recipe r = recipe("1.3b.yaml", {"parallel.micro_batch_size=4"});
  const Plan p = make_plan(r, PlanOptions{});
  CHECK(p.cuda_column_sum_scratch_bytes == 2 * 256 * 2048 * 4);
  for (const StagePlan& st : p.stages)
    CHECK(st.device.kernel_scratch ==
          std::max(p.cuda_attention_scratch_bytes, p.cuda_column_sum_scratch_bytes) +
              kBackendScratch);
  {
    const Recipe q = recipe("1.3b.yaml", {"parallel.micro_batch_size=4",
                                          "model.attention_dropout=0", "model.hidden_dropout=0"});
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
    ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", "recompute");  // delta alone: no dS^T
    const Plan f = make_plan(q, PlanOptions{});
    CHECK(f.cuda_attention_scratch_bytes == 4 * 16 * 2048 * 4);
    CHECK(f.stages[0].device.kernel_scratch == f.cuda_column_sum_scratch_bytes + kBackendScratch);
  }
}

// precision: fp8 on a GPU packs each GEMM's two operands as FP8 bytes in the backend's workspace
// (core/cuda/gemm_fp8.cc). Worked by hand for the 1.3B recipe at micro-batch 4 (8192 rows,
// hidden 2048, MLP 8192): the largest pair is fc1's weight gradient (8192 x 8192 of dy^T, then
// 2048 x 8192 of x), which fc2's forward and weight gradient tie; tp 2 halves fc1's and fc2's
// shards, and their weight gradients are then the largest: (4096 + 2048) x 8192 rows. Without
// dropout and with the recomputing FA2 kernels (one float a row), the packs are the kernel
// scratch's largest user; with attention dropout the stored dS is (512 MiB here).
TEST_CASE("fp8 on a GPU plans its packed operands in the kernel scratch") {
  CHECK(fp8_pack_bytes(16, 32, 48) == 768 + 32 * 48);
  CHECK(fp8_pack_bytes(16, 32, 17 * 16) == 4352 + 32 * 272);
  CHECK(fp8_pack_b_offset(16, 17) == 512);  // 272 bytes rounded up to 256's
  CHECK(fp8_pack_applies(16, 32, 48, 16, 32));
  CHECK_FALSE(fp8_pack_applies(16, 32, 40, 16, 32));        // k not a multiple of 16
  CHECK_FALSE(fp8_pack_applies(16, 32, 48, 16, 32 << 16));  // more rows than the pack's grid
  const Plan p = make_plan(recipe("1.3b.yaml", {"parallel.micro_batch_size=4", "precision=fp8"}),
                           PlanOptions{});
  CHECK(p.cuda_fp8_pack_bytes == 8192 * 8192 + 2048 * 8192);
  for (const StagePlan& st : p.stages)
    CHECK(st.device.kernel_scratch ==
          std::max({p.cuda_attention_scratch_bytes, p.cuda_column_sum_scratch_bytes,
                    p.cuda_fp8_pack_bytes}) +
              kBackendScratch);
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
    ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", "recompute");
    const Plan q =
        make_plan(recipe("1.3b.yaml", {"parallel.micro_batch_size=4", "precision=fp8",
                                       "model.attention_dropout=0", "model.hidden_dropout=0"}),
                  PlanOptions{});
    REQUIRE(q.cuda_fp8_pack_bytes > q.cuda_attention_scratch_bytes);
    for (const StagePlan& st : q.stages)
      CHECK(st.device.kernel_scratch == q.cuda_fp8_pack_bytes + kBackendScratch);
  }
  const Plan tp2 = make_plan(
      recipe("1.3b.yaml", {"parallel.micro_batch_size=4", "precision=fp8", "parallel.tensor=2"}),
      PlanOptions{});
  CHECK(tp2.cuda_fp8_pack_bytes == (4096 + 2048) * 8192);
  CHECK(make_plan(recipe("1.3b.yaml", {"parallel.micro_batch_size=4"}), PlanOptions{})
            .cuda_fp8_pack_bytes == 0);
  std::ostringstream json;
  print_dry_run_json(recipe("1.3b.yaml", {"parallel.micro_batch_size=4", "precision=fp8"}),
                     PlanOptions{}, json);
  CHECK(json.str().find("\"cuda_fp8_pack_bytes\": 83886080") != std::string::npos);
}

// fp8.cache_weights (the default): each local linear weight's cast kept through an iteration, in
// bf16. Worked by hand for the 1.3B recipe (24 layers, hidden 2048, MLP 8192): a layer's four
// weights are 3 x 2048 x 2048 + 2048 x 2048 + 2 x 8192 x 2048 = 50,331,648 elements, 2 bytes each,
// 2,415,919,104 bytes (2.25 GiB) a rank; tp 2 halves every shard; off, nothing.
TEST_CASE("fp8's weight casts kept through an iteration are planned") {
  const Plan p = make_plan(recipe("1.3b.yaml", {"precision=fp8"}), PlanOptions{});
  REQUIRE(p.stages.size() == 1);
  CHECK(p.stages[0].fp8_weight_cache_bytes == 2415919104);
  const Plan tp2 =
      make_plan(recipe("1.3b.yaml", {"precision=fp8", "parallel.tensor=2"}), PlanOptions{});
  CHECK(tp2.stages[0].fp8_weight_cache_bytes == 2415919104 / 2);
  const Plan off =
      make_plan(recipe("1.3b.yaml", {"precision=fp8", "fp8.cache_weights=false"}), PlanOptions{});
  CHECK(off.stages[0].fp8_weight_cache_bytes == 0);
  CHECK(p.stages[0].memory.workspace - off.stages[0].memory.workspace == 2415919104);
  CHECK(make_plan(recipe("1.3b.yaml", {}), PlanOptions{}).stages[0].fp8_weight_cache_bytes == 0);
  std::ostringstream json;
  print_dry_run_json(recipe("1.3b.yaml", {"precision=fp8"}), PlanOptions{}, json);
  CHECK(json.str().find("\"fp8_weight_cache_bytes\": 2415919104") != std::string::npos);
}

// Head size 160 (the 530B recipe's, 20480 / 128 heads): the FA2-style kernels have it, checked by
// the emulator, not yet timed on a GPU, so the default leaves it to the blocked kernels and
// MTNLG_CUDA_ATTENTION=flash2 takes it; 64 and 128 either way; fp32 never.
TEST_CASE("FA2-style kernels at head size 160 only when MTNLG_CUDA_ATTENTION names them") {
  CHECK(kernels::flash2::head_dim_supported(160));
  CHECK_FALSE(kernels::flash2::head_dim_measured(160));
  CHECK_FALSE(flash2_attention_planned(2, 160, false));
  CHECK(flash2_attention_planned(2, 160, true));
  CHECK(flash2_attention_planned(2, 128, false));
  CHECK(flash2_attention_planned(2, 64, false));
  CHECK_FALSE(flash2_attention_planned(4, 128, true));
  CHECK_FALSE(flash2_attention_planned(2, 96, true));
  // The plan of the 530B recipe's attention on a tensor rank (tp 8: 16 heads of 160, s 2048,
  // micro-batch 1, dropout 0.1): by default cuDNN's backward (rowsum(dO O), its dS in 2 bytes);
  // blocked, the blocked kernels' sequence, 16 x 2048^2 x 12 bytes; flash2 named, the FA2-style
  // backward's delta, keep bits and stored dS (128 MiB: auto stores it).
  CHECK(cuda_attention_scratch(1, 16, 2048, 160, 2, true, attention_choice()) ==
        16 * 2048 * 4 + 16 * 2048 * int64_t{2048} * 2);
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "blocked");
    CHECK(cuda_attention_scratch(1, 16, 2048, 160, 2, true, attention_choice()) ==
          16 * 2048 * int64_t{2048} * 12);
  }
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
  CHECK(attention_choice().flash2_named);
  CHECK(cuda_attention_scratch(1, 16, 2048, 160, 2, true, attention_choice()) ==
        kernels::flash2::backward_scratch_bytes(1, 16, 2048, true, true));
}

// What the log and --dry-run say runs (attention_kernels_description), by the rule the scratch
// is planned by: the recipes by default, and each named family.
TEST_CASE("the attention kernels a plan names - by default and as named") {
  const auto kernels = [](const Recipe& r) {
    return make_plan(r, PlanOptions{}).cuda_attention_kernels;
  };
  CHECK(kernels(recipe("1.3b.yaml")) == "cudnn");
  CHECK(kernels(recipe("1.3b.yaml", {"precision=fp32"})) == "blocked");
  CHECK(kernels(recipe("530b.yaml")) == "cudnn");                      // head size 160
  CHECK(kernels(recipe("tiny.yaml", {"precision=bf16"})) == "cudnn");  // head size 16
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
    CHECK(kernels(recipe("1.3b.yaml")) == "flash2 (dq from stored dS)");
    CHECK(kernels(recipe("1.3b.yaml",
                         {"model.seq_length=8192", "model.max_position_embeddings=8192"})) ==
          "flash2 (dq recomputes dS)");
    CHECK(kernels(recipe("530b.yaml")) == "flash2 (dq from stored dS)");
    CHECK(kernels(recipe("tiny.yaml", {"precision=bf16"})) == "blocked");  // head size 16
  }
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2-fwd");
    CHECK(kernels(recipe("1.3b.yaml")) == "flash2 forward, blocked backward");
  }
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2-bwd");
    ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", "recompute");
    CHECK(kernels(recipe("1.3b.yaml")) == "blocked forward, flash2 backward (dq recomputes dS)");
  }
  // The recipe's model.attention_backend names them too; MTNLG_CUDA_ATTENTION, when set, wins.
  CHECK(kernels(recipe("1.3b.yaml", {"model.attention_backend=flash2"})) ==
        "flash2 (dq from stored dS)");
  CHECK(kernels(recipe("1.3b.yaml", {"model.attention_backend=blocked"})) == "blocked");
  CHECK(kernels(recipe("1.3b.yaml", {"model.attention_backend=cudnn"})) == "cudnn");
  CHECK(kernels(recipe("530b.yaml", {"model.attention_backend=flash2"})) ==
        "flash2 (dq from stored dS)");  // head size 160: named, so taken
  CHECK(attention_choice(AttentionBackend::kCudnn).cudnn_named);
  CHECK_FALSE(attention_choice(AttentionBackend::kAuto).cudnn_named);
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "blocked");
    CHECK(kernels(recipe("1.3b.yaml", {"model.attention_backend=flash2"})) == "blocked");
  }
  // The first FA-style kernels (`flash`) were removed: naming them is an error listing the rest.
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash");
  CHECK_THROWS_WITH(attention_choice(),
                    Catch::Contains("MTNLG_CUDA_ATTENTION=flash") && Catch::Contains("flash2-bwd"));
}

// MTNLG_CUDA_ATTENTION=cudnn: cuDNN's fused attention in both passes where it applies (bf16/fp16,
// head sizes multiples of 8 up to 256: the 530B recipe's 160 too), blocked elsewhere; its
// backward's scratch planned as rowsum(dO O) and, deterministic (the default), dS of [b, heads,
// s, s] padded to 64 in 2 bytes, or accumulating, dQ in fp32.
TEST_CASE("MTNLG_CUDA_ATTENTION=cudnn: where cuDNN's attention runs and the scratch planned") {
  const auto kernels = [](const Recipe& r) {
    return make_plan(r, PlanOptions{}).cuda_attention_kernels;
  };
  using K = AttentionKernels;
  // The default: cuDNN where it applies, the FA2-style kernels where they do and it does not
  // (none of their measured head sizes), the blocked ones elsewhere.
  const AttentionChoice by_default = attention_choice();
  CHECK(by_default == AttentionChoice(K::kCudnn));
  CHECK_FALSE(by_default.cudnn_named);
  CHECK(attention_kernels_run(K::kCudnn, by_default, 2, 64) == K::kCudnn);
  CHECK(attention_kernels_run(K::kCudnn, by_default, 2, 256) == K::kCudnn);
  CHECK(attention_kernels_run(K::kCudnn, by_default, 2, 20) == K::kBlocked);
  CHECK(attention_kernels_run(K::kCudnn, by_default, 2, 264) == K::kBlocked);
  CHECK(attention_kernels_run(K::kCudnn, by_default, 4, 64) == K::kBlocked);  // fp32
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "cudnn");
  AttentionChoice named{K::kCudnn};
  named.cudnn_named = true;
  CHECK(attention_choice() == named);
  CHECK(kernels(recipe("1.3b.yaml")) == "cudnn");
  CHECK(kernels(recipe("530b.yaml")) == "cudnn");
  CHECK(kernels(recipe("1.3b.yaml", {"precision=fp32"})) == "blocked");
  CHECK(kernels(recipe("tiny.yaml", {"precision=bf16"})) == "cudnn");  // head size 16
  CHECK(cuda_attention_scratch(4, 16, 2048, 128, 2, true, attention_choice()) ==
        4 * 16 * 2048 * 4 + int64_t{4} * 16 * 2048 * 2048 * 2);
  // The forward takes none of it (cuDNN's forward workspace is its own, 0 on Hopper).
  CHECK(cuda_attention_scratch(1, 2, 100, 64, 2, false, attention_choice()) ==
        1 * 2 * 100 * 4 + 1 * 2 * 128 * 128 * 2);
  {
    ScopedEnv dq("MTNLG_CUDA_CUDNN_DQ", "accumulate");
    CHECK(cuda_attention_scratch(4, 16, 2048, 128, 2, true, attention_choice()) ==
          4 * 16 * 2048 * 4 + int64_t{4} * 16 * 2048 * 128 * 4);
  }
  ScopedEnv bad("MTNLG_CUDA_CUDNN_DQ", "atomic");
  CHECK_THROWS_WITH(make_plan(recipe("1.3b.yaml"), PlanOptions{}),
                    Catch::Contains("MTNLG_CUDA_CUDNN_DQ"));
}

// MTNLG_CUDA_FLASH2_DQ=auto (the default): dS^T stored while one call's takes at most 1 GiB (2
// bytes an element of [b, heads, s, s rounded up to 8], and 64 elements of slack), recomputed
// beyond; stored and recompute hold whatever the size. The planner counts what the backend does.
TEST_CASE("MTNLG_CUDA_FLASH2_DQ auto stores dS up to 1 GiB a call - stored and recompute always") {
  using K = AttentionKernels;
  const AttentionChoice by_default = attention_choice();
  CHECK(by_default.flash2_dq == Flash2Dq::kAuto);
  // 8 heads x 8184^2 elements: 1,071,644,736 bytes with the slack, under 2^30; 8 x 8192^2 is 2^30
  // bytes before the slack, over.
  CHECK(by_default.flash2_stores_ds(1, 8, 8184));
  CHECK_FALSE(by_default.flash2_stores_ds(1, 8, 8192));
  CHECK(kernels::flash2::ds_bytes(1, 8, 8184) <= kFlash2AutoStoredDsBytes);
  CHECK(kernels::flash2::ds_bytes(1, 8, 8192) > kFlash2AutoStoredDsBytes);
  // The 1.3B recipe's micro-batch, 4 x 16 heads x 2048: 512 MiB, stored.
  CHECK(by_default.flash2_stores_ds(4, 16, 2048));
  const AttentionChoice stored{K::kFlash2, K::kFlash2, Flash2Dq::kStored};
  const AttentionChoice recompute{K::kFlash2, K::kFlash2, Flash2Dq::kRecompute};
  CHECK(stored.flash2_stores_ds(4, 16, 8192));
  CHECK_FALSE(recompute.flash2_stores_ds(1, 1, 8));
  {
    ScopedEnv env("MTNLG_CUDA_FLASH2_DQ", "stored");
    CHECK(attention_choice().flash2_dq == Flash2Dq::kStored);
  }
  {
    ScopedEnv env("MTNLG_CUDA_FLASH2_DQ", "auto");
    CHECK(attention_choice() == by_default);
  }
  // The plan: the 1.3B recipe at 8192 tokens a sequence (4 x 16 heads: 8 GiB of dS^T) with the
  // FA2-style kernels takes the recomputing backward's scratch by default, the stored one's when
  // asked.
  ScopedEnv fa2("MTNLG_CUDA_ATTENTION", "flash2");
  const Recipe r =
      recipe("1.3b.yaml", {"model.seq_length=8192", "model.max_position_embeddings=8192"});
  const int64_t b = r.parallel.micro_batch_size, heads = 16, s = 8192;
  REQUIRE(b == 4);
  const int64_t stats = b * heads * s * 4 + b * heads * s * (s / 32) * 4;  // delta, keep bits
  CHECK(make_plan(r, PlanOptions{}).cuda_attention_scratch_bytes == stats);
  ScopedEnv env("MTNLG_CUDA_FLASH2_DQ", "stored");
  CHECK(make_plan(r, PlanOptions{}).cuda_attention_scratch_bytes ==
        stats + kernels::flash2::ds_bytes(b, heads, s));
}

TEST_CASE("MTNLG_CUDA_ATTENTION is read as the CUDA backend reads it - a misspelling is an error") {
  const Recipe r = recipe("1.3b.yaml");
  const auto scratch = [&] { return make_plan(r, PlanOptions{}).cuda_attention_scratch_bytes; };
  // Unset: cuDNN's attention (the default); `blocked`: one sequence's scores, probabilities and
  // their gradients, 16 heads x 2048^2 x (4 + 4 + 2 + 2).
  CHECK(attention_choice() == AttentionChoice(AttentionKernels::kCudnn));
  CHECK(cuda_switches().attention == attention_choice());
  const int64_t by_default = scratch();
  int64_t blocked = 0;
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "blocked");
    CHECK(attention_choice() == AttentionChoice(AttentionKernels::kBlocked));
    blocked = scratch();
    CHECK(blocked == 16 * 2048 * int64_t{2048} * 12);
  }
  {
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "");  // empty is unset
    CHECK(scratch() == by_default);
  }
  {
    // The FA2-style kernels at head size 128: the per-row delta, and for the recipe's attention
    // dropout the keep bits, 2048 / 32 words a row; with dS stored (the default) dS^T besides,
    // 2 bytes an element of [4, 16, 2048, 2048] and 64 of slack.
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
    // Named, not the default: the same kernels (and the head sizes not yet measured besides).
    CHECK(attention_choice() == AttentionChoice(AttentionKernels::kFlash2,
                                                AttentionKernels::kFlash2, Flash2Dq::kAuto, true));
    CHECK(attention_choice() != AttentionChoice(AttentionKernels::kFlash2));
    const Recipe q = recipe("1.3b.yaml");
    const int64_t stats = q.parallel.micro_batch_size * 16 * 2048 * (4 + 64 * 4);
    CHECK(scratch() == stats + (q.parallel.micro_batch_size * 16 * 2048 * int64_t{2048} + 64) * 2);
    CHECK(scratch() < blocked);
    ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", "recompute");
    CHECK(attention_choice() == AttentionChoice(AttentionKernels::kFlash2,
                                                AttentionKernels::kFlash2, Flash2Dq::kRecompute,
                                                true));
    CHECK(scratch() == stats);
  }
  {
    // flash2's forward and the blocked backward: the blocked backward's scratch, as blocked.
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2-fwd");
    CHECK(attention_choice() == AttentionChoice(AttentionKernels::kFlash2,
                                                AttentionKernels::kBlocked, Flash2Dq::kAuto, true));
    CHECK(scratch() == blocked);
  }
  {
    // The blocked forward and flash2's backward: one sequence's fp32 scores, probabilities and
    // dropped probabilities (16 heads x 2048^2 x (4 + 2 + 2)), more than flash2's backward takes
    // recomputing dS, less than it takes storing it (the whole micro-batch's, 2 bytes each).
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2-bwd");
    CHECK(attention_choice() == AttentionChoice(AttentionKernels::kBlocked,
                                                AttentionKernels::kFlash2, Flash2Dq::kAuto, true));
    const int64_t forward = 16 * 2048 * 2048 * int64_t{4 + 2 + 2};
    CHECK(scratch() > forward);
    CHECK(scratch() < blocked);
    ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", "recompute");
    CHECK(scratch() == forward);
  }
  {
    ScopedEnv env("MTNLG_CUDA_FLASH2_DQ", "stores");
    CHECK_THROWS_WITH(scratch(), Catch::Contains("MTNLG_CUDA_FLASH2_DQ=stores is not one of "
                                                 "auto, stored, recompute"));
  }
  {
    // Tensor-parallel with attention dropout: the layer calls attention one sequence at a time,
    // so the FA2-style scratch is one sequence's (its delta, keep bits and dS^T over 8 local
    // heads), not the micro-batch's.
    ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
    const Recipe tp2 = recipe("1.3b.yaml", {"parallel.tensor=2"});
    const Plan p2 = make_plan(tp2, PlanOptions{});
    REQUIRE(p2.tensor == 2);
    CHECK(p2.cuda_attention_scratch_bytes ==
          8 * 2048 * (4 + 64 * 4) + (8 * 2048 * int64_t{2048} + 64) * 2);
  }
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "Flash");
  CHECK_THROWS_WITH(scratch(), Catch::Contains("MTNLG_CUDA_ATTENTION=Flash is not one of "
                                               "cudnn, flash2, blocked, flash2-fwd, "
                                               "flash2-bwd (unset it for the default, cudnn)"));
}

TEST_CASE("device overheads: per stage on a GPU - counted in fits - none on the CPU") {
  // tiny on tp 2 x pp 3 x dp 2 (12 ranks), bf16: every NCCL communicator of two or more ranks.
  const Recipe r =
      recipe("tiny.yaml", {"model.num_layers=3", "parallel.tensor=2", "parallel.pipeline=3",
                           "parallel.data=2", "precision=bf16", "batch.global_batch_size=12"});
  const Plan p = make_plan(r, PlanOptions{});
  REQUIRE(p.stages.size() == 3);
  // world, tensor, data, data-grads, pipeline; embedding on the first and last stages only.
  CHECK(p.stages[0].device.nccl_communicators == 6);
  CHECK(p.stages[1].device.nccl_communicators == 5);
  CHECK(p.stages[2].device.nccl_communicators == 6);
  for (const StagePlan& st : p.stages) {
    CHECK(st.device.cuda_context == kCudaContextEstimateBytes);
    CHECK(st.device.blas_workspace == int64_t{32} << 20);
    // Attention's, and the CUDA backend's own.
    CHECK(st.device.kernel_scratch ==
          std::max(p.cuda_attention_scratch_bytes, p.cuda_column_sum_scratch_bytes) +
              kBackendScratch);
    CHECK(st.device.nccl_buffers == st.device.nccl_communicators * kNcclCommunicatorEstimateBytes);
    CHECK(st.device_total() == st.memory.total() + st.device.cuda_context +
                                   st.device.blas_workspace + st.device.kernel_scratch +
                                   st.device.nccl_buffers);
  }
  // The NCCL estimate: 32 channels of 4 MiB + 4800 KiB + 512 KiB, about 0.29 GiB.
  CHECK(kNcclCommunicatorEstimateBytes == 32 * (4096 + 4800 + 512) * 1024LL);
  CHECK(blas_workspace_bytes(8) == int64_t{4} << 20);
  CHECK(blas_workspace_bytes(9) == int64_t{32} << 20);
  // One rank: no NCCL communicator at all.
  const Plan one = make_plan(recipe("tiny.yaml"), world(1));
  CHECK(one.stages[0].device.nccl_communicators == 0);
  CHECK(one.stages[0].device.nccl_buffers == 0);
  // fits judges the device total: a limit above the tensors but below the overheads does not fit;
  // the same limit fits a CPU plan, which has no overheads.
  PlanOptions o;
  o.gpu_memory_gb = static_cast<double>(p.worst().memory.total() + (int64_t{64} << 20)) /
                    (1024.0 * 1024.0 * 1024.0);
  const Plan tight = make_plan(r, o);
  CHECK_FALSE(tight.fits);
  CHECK(tight.worst_device().device_total() > tight.memory_limit_bytes);
  o.device = Device::kCPU;
  const Plan cpu = make_plan(r, o);
  CHECK(cpu.fits);
  for (const StagePlan& st : cpu.stages) CHECK(st.device.total() == 0);
  o.device = Device::kCUDA;
  o.gpu_memory_gb =
      static_cast<double>(p.worst_device().device_total()) / (1024.0 * 1024.0 * 1024.0) + 1e-6;
  CHECK(make_plan(r, o).fits);
  // The text names each term and judges by the device total; the JSON carries them per stage.
  std::ostringstream text, json;
  print_dry_run(r, PlanOptions{}, text);
  for (const char* row : {"CUDA context (est.)", "BLAS workspace", "kernel scratch",
                          "NCCL buffers (est.)", "  communicators", "device total"})
    CHECK(text.str().find(row) != std::string::npos);
  CHECK(text.str().find("beyond its tensors") != std::string::npos);
  print_dry_run_json(r, PlanOptions{}, json);
  for (const char* key :
       {"\"device_overhead_bytes\": {\"cuda_context\": ", "\"nccl_communicators\": 6",
        "\"device_total_per_rank_bytes\": ", "\"worst_device_stage\": "})
    CHECK(json.str().find(key) != std::string::npos);
  std::ostringstream cpu_text;
  PlanOptions on_cpu;
  on_cpu.device = Device::kCPU;
  print_dry_run(r, on_cpu, cpu_text);
  CHECK(cpu_text.str().find("NCCL buffers") == std::string::npos);
}
