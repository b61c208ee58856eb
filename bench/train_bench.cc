// mtnlg-bench-train: training throughput of the full GPT model on the CPU backend.
//
// Times whole training iterations (zero grads; forward + backward per micro-batch, accumulating
// gradients; global grad norm and clip coefficient; AdamW step) on random tokens after warm-up,
// and reports tokens/s and model TFLOP/s (the count of model/gpt_flops.h). bench/torch_train.py
// is the same measurement on PyTorch; bench/run.sh runs both side by side.
// --profile times every Backend call by phase and kind (GEMMs by projection) to show where an
// iteration's time goes. Exit status: 0 done; 2 bad flags; 1 other errors.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_backend.h"
#include "bench/model_gemms.h"
#include "bench/op_timer.h"
#include "bench/slice_group.h"
#include "cmd/cli_parse.h"
#include "core/config/recipe.h"
#include "core/cuda/attention_workspace.h"
#include "core/device_peak.h"
#include "model/captured_micro_batch.h"
#include "model/gpt_flops.h"
#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "optim/adamw.h"
#include "optim/captured_adamw_step.h"

namespace {

using namespace mtnlg;

struct Options {
  std::string name = "model";
  int64_t layers = 4, hidden = 256, heads = 4, seq = 128, vocab = 50257;
  int64_t micro_batch = 4, global_batch = 8;
  int iters = 5, warmup_iters = 1, threads = 0;
  uint64_t seed = 1234;
  double dropout = 0.0;      // hidden and attention dropout, as a recipe's model.*_dropout
  int64_t ffn = 0;           // 0: 4 * hidden
  int64_t tensor_slice = 1;  // > 1: one tensor rank of this many (bench/slice_group.h)
  bool activation_checkpointing = false;
  bool json = false, profile = false, plain_weights = false, compare_weights = false;
  bool graph = false;              // a micro-batch's forward and backward captured once, replayed
  std::string precision = "fp32";  // or bf16: bf16 weights/activations, fp32 masters (as --config)
  std::string device = "cpu";      // or cuda (GPU 0)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

GPTConfig config_from(const Options& o) {
  GPTConfig c;
  c.num_layers = o.layers;
  c.hidden = o.hidden;
  c.heads = o.heads;
  c.ffn = o.ffn > 0 ? o.ffn : 4 * o.hidden;
  c.seq = o.seq;
  c.max_positions = o.seq;
  c.vocab = o.vocab;
  // Megatron's rule: a multiple of 128 x the tensor ranks.
  const int64_t multiple = 128 * o.tensor_slice;
  c.padded_vocab = (o.vocab + multiple - 1) / multiple * multiple;
  c.tp_size = o.tensor_slice;
  c.activation_checkpointing = o.activation_checkpointing;
  c.activation = Activation::kGelu;  // exact erf GeLU, as torch.nn.GELU()
  c.hidden_dropout = o.dropout;
  c.attention_dropout = o.dropout;
  c.fp8 = o.precision == "fp8";  // Transformer Engine's defaults (hybrid, delayed scaling)
  return c;
}

void validate(const Options& o) {
  if (o.hidden % o.heads != 0)
    throw invalid_argument("--hidden " + std::to_string(o.hidden) +
                               " is not divisible by --heads " + std::to_string(o.heads),
                           "--heads");
  if (o.compare_weights && o.iters < 2)
    throw invalid_argument("--compare-weights needs --iters >= 2 (it alternates iterations)",
                           "--iters");
  if (o.global_batch % o.micro_batch != 0)
    throw invalid_argument("--global-batch " + std::to_string(o.global_batch) +
                               " is not a multiple of --micro-batch " +
                               std::to_string(o.micro_batch),
                           "--global-batch");
  if (!(o.dropout >= 0.0 && o.dropout < 1.0))
    throw invalid_argument("--dropout " + std::to_string(o.dropout) + " is not in [0, 1)",
                           "--dropout");
  for (const auto& [flag, n] : {std::pair<const char*, int64_t>{"--heads", o.heads},
                                {"--hidden", o.hidden},
                                {"--ffn", o.ffn > 0 ? o.ffn : 4 * o.hidden}})
    if (n % o.tensor_slice != 0)
      throw invalid_argument(std::string(flag) + " " + std::to_string(n) +
                                 " is not divisible by --tensor-slice " +
                                 std::to_string(o.tensor_slice),
                             "--tensor-slice");
  if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "fp8")
    throw invalid_argument("--precision " + o.precision + " is not fp32, bf16 or fp8",
                           "--precision");
  // A replay repeats the recorded calls' arguments: what the host passes anew each micro-batch
  // (fp8's scales; dropout's streams go through Backend::set_rng_stream_base), a wait
  // (--profile's timer, the tensor slice's mappings) cannot be inside it (Backend::capture).
  if (o.graph) {
    const auto refuse = [](const std::string& why, const char* flag) {
      throw invalid_argument("--graph " + why, flag);
    };
    if (o.precision == "fp8")
      refuse("needs --precision fp32 or bf16 (the host passes fp8's scales)", "--precision");
    if (o.profile)
      refuse("and --profile: the timer waits for the device after every call", "--profile");
    if (o.tensor_slice > 1)
      refuse("needs --tensor-slice 1 (the mappings wait for the device)", "--tensor-slice");
    if (o.warmup_iters < 1)
      refuse(
          "needs --warmup-iters >= 1 (a plain run first makes the buffers and plans a "
          "recording may not; the next records)",
          "--warmup-iters");
  }
}

// Prints the --profile table: each category's time per timed iteration, its share, and the
// achieved GFLOP/s where it has a FLOP count (GEMMs, attention).
void print_profile(const std::map<std::string, bench::OpTiming>& timings, int iters,
                   double iter_seconds, std::FILE* out) {
  std::vector<std::pair<std::string, bench::OpTiming>> rows(timings.begin(), timings.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0.0;
  int64_t calls = 0;
  std::map<std::string, double> by_phase, by_kind;
  std::map<std::string, int64_t> phase_calls;
  for (const auto& [key, t] : rows) {
    total += t.seconds;
    calls += t.calls;
    const auto slash = key.find('/');
    by_phase[key.substr(0, slash)] += t.seconds;
    phase_calls[key.substr(0, slash)] += t.calls;
    const std::string op = key.substr(slash + 1);
    by_kind[op.starts_with("gemm") ? "gemm" : op] += t.seconds;
  }
  // The calls an iteration: each is at least one kernel launch on a GPU (a library's GEMM or
  // attention may launch more), the count a CUDA graph would replace.
  std::fprintf(out,
               "\nprofile: backend time per iteration by call (%d iterations; %lld calls an "
               "iteration; timed calls sum to %.1f ms of %.1f ms measured per iteration)\n",
               iters, static_cast<long long>(calls / iters), 1e3 * total / iters,
               1e3 * iter_seconds);
  std::fprintf(out, "%-60s %7s %10s %6s %8s\n", "phase/call", "calls", "ms/iter", "%", "GFLOP/s");
  for (const auto& [key, t] : rows) {
    std::fprintf(out, "%-60s %7lld %10.2f %6.1f", key.c_str(),
                 static_cast<long long>(t.calls / iters), 1e3 * t.seconds / iters,
                 100.0 * t.seconds / total);
    if (t.flops > 0) std::fprintf(out, " %8.1f", t.flops / t.seconds * 1e-9);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "\nby phase:");
  for (const auto& [phase, s] : by_phase)
    std::fprintf(out, "  %s %.1f ms (%.1f%%, %lld calls)", phase.c_str(), 1e3 * s / iters,
                 100.0 * s / total, static_cast<long long>(phase_calls[phase] / iters));
  std::vector<std::pair<std::string, double>> kinds(by_kind.begin(), by_kind.end());
  std::sort(kinds.begin(), kinds.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::fprintf(out, "\nby kind: ");
  for (const auto& [kind, s] : kinds)
    std::fprintf(out, "  %s %.1f ms (%.1f%%)", kind.c_str(), 1e3 * s / iters, 100.0 * s / total);
  std::fprintf(out, "\n");
}

int run(const Options& o) {
  validate(o);
  const GPTConfig config = config_from(o);
  auto cpu = bench::make_bench_backend(o.device, o.threads);
  bench::OpTimer timed(*cpu);
  struct Detach {  // the hook goes before the timer does
    Backend& backend;
    ~Detach() { backend.set_op_hook(nullptr); }
  } detach{*cpu};
  if (o.profile) cpu->set_op_hook(&timed);
  Backend& be = *cpu;
  const int64_t tokens_per_micro = o.micro_batch * o.seq;
  const auto gemms =
      bench::model_gemms(tokens_per_micro, config.hidden, config.ffn, config.padded_vocab);
  timed.set_gemm_labeler([&gemms](bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    return bench::gemm_label(gemms, ta, tb, m, n, k);
  });

  const DType dtype = o.precision == "fp32" ? DType::kF32 : DType::kBF16;
  std::optional<bench::SliceGroup> slice;
  if (o.tensor_slice > 1) slice.emplace(static_cast<int>(o.tensor_slice));
  GPTStage model(config, full_model(config), be, dtype, o.seed, slice ? &*slice : nullptr);
  model.init_weights(o.seed);
  OptimizerConfig opt_config;  // defaults: lr 1e-4, betas (0.9, 0.999), wd 0.01, clip 1.0
  AdamW optimizer(model.params(), be, opt_config);
  StageActivations acts = model.make_activations(o.micro_batch);

  // Random tokens and targets, one pair of buffers per micro-batch of the global batch.
  const int64_t accum = o.global_batch / o.micro_batch;
  std::mt19937_64 gen(o.seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(o.vocab - 1));
  std::vector<Tensor> tokens, targets;
  for (int64_t i = 0; i < accum; ++i) {
    tokens.push_back(Tensor::cpu({o.micro_batch, o.seq}, DType::kI32));
    targets.push_back(Tensor::cpu({o.micro_batch, o.seq}, DType::kI32));
    for (int64_t j = 0; j < tokens_per_micro; ++j) {
      tokens.back().data_as<int32_t>()[j] = token(gen);
      targets.back().data_as<int32_t>()[j] = token(gen);
    }
  }
  const double tokens_per_iter = static_cast<double>(o.global_batch * o.seq);

  std::vector<double> times, plain_times;  // plain_times: --compare-weights' odd iterations
  double loss = 0.0;
  LossSum loss_sum(be);  // as the trainer: summed on the device, read once an iteration
  uint64_t micro_id = 0;
  int64_t waits_before = 0;  // Backend::host_waits at the first timed iteration
  // --graph: each micro-batch's forward and backward, and the optimizer step, replayed as the
  // trainer's parallel.cuda_graph replays them (CapturedMicroBatch, CapturedAdamWStep: the first
  // plain and the second recorded, in the warm-up; a CUDA graph on the GPU, the calls again on
  // the CPU).
  std::unique_ptr<CapturedMicroBatch> captured;
  std::unique_ptr<CapturedAdamWStep> captured_step;
  if (o.graph) {
    captured = std::make_unique<CapturedMicroBatch>(model, be);
    captured_step = std::make_unique<CapturedAdamWStep>(optimizer, model.params(), be);
  }
  // The launches of a micro-batch's forward and backward: the nodes of its recording (recorded,
  // not run, where --graph does not replay it), where a recording can hold it (not with
  // --profile's waits, the tensor slice's mappings or fp8's scales); -1 on the CPU.
  int64_t launches = -1;
  const bool recordable = !o.profile && o.tensor_slice == 1 && o.precision != "fp8";
  for (int it = 0; it < o.warmup_iters + o.iters; ++it) {
    if (it == o.warmup_iters) {
      if (!o.graph && recordable && it > 0) {
        launches = be.capture([&] {
                       model.forward(acts, acts.tokens, acts.targets, 0, loss_sum);
                       model.backward(acts, Tensor(), 1.0 / tokens_per_iter);
                     })->launches();
      }
      timed.reset();
      waits_before = be.host_waits();
    }
    const auto t0 = std::chrono::steady_clock::now();
    timed.set_phase("optimizer");
    model.params().zero_grads(be);
    {
      // As the trainer: weights fixed until the optimizer step (bf16 on the CPU: each weight
      // reordered once per iteration), unless --plain-weights (or an odd iteration of
      // --compare-weights).
      const bool plain = o.plain_weights || (o.compare_weights && it % 2 == 1);
      std::optional<FrozenWeights> frozen;
      if (!plain) frozen.emplace(be);
      for (int64_t i = 0; i < accum && captured; ++i)
        captured->run(acts, tokens[i], targets[i], micro_id++, 1.0 / tokens_per_iter, loss_sum);
      for (int64_t i = 0; i < accum && !captured; ++i) {
        timed.set_phase("forward");
        model.forward(acts, tokens[i], targets[i], micro_id++, loss_sum);
        timed.set_phase("backward");
        model.backward(acts, Tensor(), 1.0 / tokens_per_iter);
      }
    }
    timed.set_phase("optimizer");
    if (captured_step) {
      // --graph: the norm, clip and AdamW replayed too, the loss and norm read after it (the
      // trainer's parallel.cuda_graph; its first call plain, its second records).
      captured_step->queue(opt_config.lr, 1.0, loss_sum.device_total());
      loss = loss_sum.take_read(be, captured_step->finish().loss) / tokens_per_iter;
    } else {
      loss = loss_sum.take(be) / tokens_per_iter;
      const double norm = global_grad_norm(be, model.params());
      optimizer.step(opt_config.lr, clip_coefficient(norm, opt_config.clip_grad));
    }
    if (Fp8Linears* fp8 = model.fp8()) fp8->end_step({});
    be.synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (it >= o.warmup_iters)
      (o.compare_weights && it % 2 == 1 ? plain_times : times).push_back(dt);
  }

  if (captured) launches = captured->launches();  // the recording replayed last
  // A slice executes its share of the model's FLOPs: 1 / tensor_slice of every layer's and of
  // the logits' (the whole model's count over the ranks, as the trainer's tflops_per_device).
  const double flops_per_token = model_flops_per_token(config, config.activation_checkpointing) /
                                 static_cast<double>(o.tensor_slice);
  const double med = median(times), best = *std::min_element(times.begin(), times.end());
  const double tokens_per_s = tokens_per_iter / med;
  const double tflops = flops_per_token * tokens_per_s * 1e-12;
  std::FILE* text = o.json ? stderr : stdout;
  // MFU as the field states it: over the device's datasheet dense peak (core/device_peak.h).
  const auto spec = device_spec_from_name(cpu->name());
  const double peak = spec ? spec->peak(o.precision == "bf16"  ? PeakPrecision::kBf16
                                        : o.precision == "fp8" ? PeakPrecision::kFp8
                                                               : PeakPrecision::kTf32)
                           : 0.0;
  const std::string peak_json = peak > 0 ? fmt::format("{:g}", peak) : "null";
  const std::string mfu_json = peak > 0 ? fmt::format("{:.6f}", tflops / peak) : "null";
  const int64_t head_dim = config.hidden / config.heads;
  const std::string attention =
      o.device == "cuda" ? attention_kernels_description(cuda_switches().attention, o.micro_batch,
                                                         config.local_heads(), config.seq, head_dim,
                                                         dtype == DType::kBF16 ? 2 : 4)
                         : "cpu";
  // The host's waits for the device an iteration (each drains its queue; a CUDA graph needs
  // none inside it): without --profile, whose timer waits after every call.
  const double waits_per_iter =
      static_cast<double>(be.host_waits() - waits_before) / static_cast<double>(o.iters);
  const std::string waits_json = o.profile ? "null" : fmt::format("{:g}", waits_per_iter);
  const std::string launches_json = launches >= 0 ? std::to_string(launches) : "null";
  const int64_t optimizer_launches = captured_step ? captured_step->launches() : -1;
  const std::string optimizer_launches_json =
      optimizer_launches >= 0 ? std::to_string(optimizer_launches) : "null";
  if (o.profile) print_profile(timed.timings(), o.iters, med, text);
  if (o.json) {
    std::printf(
        "{\"impl\":\"mtnlg\",\"precision\":\"%s\",\"name\":\"%s\",\"threads\":%d,\"layers\":%lld,"
        "\"hidden\":%lld,"
        "\"heads\":%lld,\"seq\":%lld,\"vocab\":%lld,\"padded_vocab\":%lld,\"micro_batch\":%lld,"
        "\"global_batch\":%lld,\"iters\":%d,\"warmup_iters\":%d,\"params\":%lld,"
        "\"flops_per_token\":%.17g,"
        "\"tokens_per_iter\":%.0f,\"ms_median\":%.3f,\"ms_min\":%.3f,\"tokens_per_s\":%.3f,"
        "\"tflops\":%.6f,\"loss\":%.6f,\"dropout\":%g,\"device\":\"%s\",\"peak_memory_bytes\":%lld,"
        "\"reserved_bytes\":%lld,\"device_bytes_in_use\":%lld,\"ffn\":%lld,\"tensor_slice\":%lld,"
        "\"activation_checkpointing\":%s,\"attention\":\"%s\",\"peak_tflops\":%s,\"mfu\":%s,"
        "\"host_waits_per_iter\":%s,\"graph\":%s,\"launches_per_micro_batch\":%s,"
        "\"optimizer_launches\":%s}\n",
        o.precision.c_str(), o.name.c_str(), o.threads, (long long)o.layers, (long long)o.hidden,
        (long long)o.heads, (long long)o.seq, (long long)o.vocab, (long long)config.padded_vocab,
        (long long)o.micro_batch, (long long)o.global_batch, o.iters, o.warmup_iters,
        (long long)model.params().global_numel(), flops_per_token, tokens_per_iter, 1e3 * med,
        1e3 * best, tokens_per_s, tflops, loss, o.dropout, o.device.c_str(),
        (long long)cpu->peak_bytes(), (long long)cpu->reserved_bytes(),
        (long long)cpu->device_bytes_in_use(), (long long)config.ffn, (long long)o.tensor_slice,
        o.activation_checkpointing ? "true" : "false", attention.c_str(), peak_json.c_str(),
        mfu_json.c_str(), waits_json.c_str(), o.graph ? "true" : "false", launches_json.c_str(),
        optimizer_launches_json.c_str());
    return 0;
  }
  std::printf("mtnlg-bench-train (%s, %s, dropout %g)\n", cpu->name().c_str(), o.precision.c_str(),
              o.dropout);
  std::printf("model %s: L=%lld h=%lld heads=%lld s=%lld V=%lld (padded %lld), %lld params\n",
              o.name.c_str(), (long long)o.layers, (long long)o.hidden, (long long)o.heads,
              (long long)o.seq, (long long)o.vocab, (long long)config.padded_vocab,
              (long long)model.params().global_numel());
  std::printf("batch: %lld micro-batches of %lld x %lld = %.0f tokens per iteration\n",
              (long long)accum, (long long)o.micro_batch, (long long)o.seq, tokens_per_iter);
  std::printf("model FLOPs/token (model/gpt_flops.h): %.4g\n", flops_per_token);
  std::printf("iterations: %d timed after %d warm-up; loss %.4f\n", o.iters, o.warmup_iters, loss);
  std::printf("ms/iter: median %.1f, min %.1f\n", 1e3 * med, 1e3 * best);
  std::printf("tokens/s: %.1f (median iteration)\n", tokens_per_s);
  if (!o.profile)
    std::printf("host waits for the device an iteration: %g (0 on the CPU)\n", waits_per_iter);
  if (launches >= 0)
    std::printf(
        "launches a micro-batch's forward and backward make (its CUDA graph's nodes): %lld\n",
        static_cast<long long>(launches));
  if (optimizer_launches >= 0)
    std::printf(
        "launches of the optimizer step (gradient norm, clip, AdamW) replayed as one: %lld\n",
        static_cast<long long>(optimizer_launches));
  if (o.graph)
    std::printf(
        "--graph: each micro-batch's forward and backward, and the optimizer step, replayed from "
        "one capture each (a CUDA graph on the GPU: one launch)\n");
  if (o.compare_weights && !plain_times.empty())
    std::printf(
        "frozen weights %.1f ms/iter, plain weights %.1f ms/iter (medians of %zu and %zu "
        "alternating iterations): %.3fx\n",
        1e3 * med, 1e3 * median(plain_times), times.size(), plain_times.size(),
        median(plain_times) / med);
  std::printf("model TFLOP/s: %.4f\n", tflops);
  if (peak > 0)
    std::printf("MFU: %.1f%% of the %s's datasheet dense %s peak (%g TFLOP/s)\n",
                100 * tflops / peak, spec->name.c_str(), o.precision == "bf16" ? "bf16" : "TF32",
                peak);
  if (o.tensor_slice > 1)
    std::printf(
        "one tensor rank of %lld (--tensor-slice): its shards, no communication; "
        "attention: %s\n",
        (long long)o.tensor_slice, attention.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-bench-train: training throughput of a GPT model on the CPU backend, or a GPU with "
      "--device cuda (fp32 or bf16, no dropout unless --dropout, random tokens). Times full "
      "iterations: zero grads, "
      "forward + backward per "
      "micro-batch (gradient accumulation), global grad norm, AdamW step. Reports tokens/s and "
      "model TFLOP/s (model FLOPs per token: model/gpt_flops.h, docs/planning.md: Model FLOPs). "
      "Compare with "
      "bench/torch_train.py; bench/run.sh runs both."};
  app.footer(
      "Environment, with --device cuda: "
      "MTNLG_CUDA_ATTENTION=cudnn|flash2|blocked|flash2-fwd|flash2-bwd (attention "
      "kernels; cudnn, cuDNN's fused attention, by default where it applies (flash2 or blocked "
      "where cuDNN is missing or refuses a shape), flash2 the FA2-style kernels where they apply "
      "and blocked elsewhere, blocked everywhere, flash2-fwd and flash2-bwd the FA2-style "
      "kernels in one pass and the blocked ones in the other), "
      "MTNLG_CUDA_CUDNN_DQ=deterministic|accumulate (cuDNN's dQ by a GEMM, bit-reproducible, "
      "or by atomics), "
      "MTNLG_CUDA_FLASH2_ROWS=64|128 (query rows of a flash2 forward block; 64 by default), "
      "MTNLG_CUDA_FLASH2_DQ=auto|stored|recompute (flash2's dq from dS stored by its dk/dv pass "
      "or recomputed; auto, the default, stores while dS of a call takes at most 1 GiB) and "
      "MTNLG_CUDA_EPILOGUES=on|off "
      "(the linear layers' bias and tanh GeLU in cuBLASLt's epilogue; on by default).");
  Options o;
  app.add_option("--name", o.name, "Label for the output (e.g. demo, gpt2-124m)")
      ->capture_default_str();
  app.add_option("--layers", o.layers, "Transformer layers L")->capture_default_str();
  app.add_option("--hidden", o.hidden, "Hidden size h (ffn is 4h)")->capture_default_str();
  app.add_option("--heads", o.heads, "Attention heads (must divide --hidden)")
      ->capture_default_str();
  app.add_option("--seq", o.seq, "Sequence length s")->capture_default_str();
  app.add_option("--vocab", o.vocab, "Vocabulary V (padded up to a multiple of 128)")
      ->capture_default_str();
  app.add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch")
      ->capture_default_str();
  app.add_option("--global-batch", o.global_batch,
                 "Sequences per iteration (a multiple of --micro-batch; the rest is gradient "
                 "accumulation)")
      ->capture_default_str();
  app.add_option("--iters", o.iters, "Timed iterations")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_option("--warmup-iters", o.warmup_iters, "Untimed iterations first")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads (0: all cores)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the weights and the random tokens")
      ->capture_default_str();
  app.add_option("--precision", o.precision,
                 "fp32, bf16 (bf16 weights and activations, fp32 main gradients, masters and "
                 "moments), or fp8 (bf16 with the linear layers' GEMMs on FP8 casts: on the CPU "
                 "bf16 GEMMs on the FP8 values, on a GPU cuBLASLt's FP8 GEMMs where they apply; "
                 "hybrid formats, delayed scaling; MFU against the FP8 peak)")
      ->capture_default_str();
  app.add_option("--device", o.device,
                 "cpu, or cuda (GPU 0; needs a CUDA build): the backend the model trains on")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--dropout", o.dropout,
                 "Hidden and attention dropout probability, as a recipe's model.hidden_dropout "
                 "and model.attention_dropout (Megatron's 0.1); 0: none")
      ->capture_default_str();
  app.add_option("--ffn", o.ffn, "MLP width (0: 4 x --hidden)")
      ->check(mtnlg::non_negative_number());
  app.add_option("--tensor-slice", o.tensor_slice,
                 "Train what one tensor-parallel rank of N holds (its 1/N of every layer's "
                 "columns and heads, and of the vocabulary) on this one device, its peers' "
                 "collectives skipped: the compute of a model too large for one device (the "
                 "530B layer as one of 8 tensor ranks). Timing only: the loss is not the "
                 "model's, no communication time is counted; TFLOP/s are the rank's share")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_flag("--activation-checkpointing", o.activation_checkpointing,
               "Recompute each layer's forward in backward (as parallel.activation_checkpointing;"
               " the recomputed forward counts in the model FLOPs, as the paper's)");
  app.add_flag("--json", o.json, "Print one JSON line on stdout (text goes to stderr)");
  app.add_flag("--plain-weights", o.plain_weights,
               "No frozen-weights window around an iteration's micro-batches: bf16 GEMMs on the "
               "CPU then reorder each weight inside every call, and fp8 casts each weight at "
               "every use (for comparison)");
  app.add_flag("--compare-weights", o.compare_weights,
               "Alternate iterations with and without the frozen-weights window and print both "
               "medians side by side (tokens/s and --json report the windowed ones)")
      ->excludes("--plain-weights");
  app.add_flag("--graph", o.graph,
               "Replay each micro-batch's forward and backward from one capture, as the "
               "trainer's parallel.cuda_graph does (CapturedMicroBatch: the first micro-batch "
               "plain, the second recorded, in the warm-up; each one's ids uploaded first; "
               "Backend::capture: a CUDA graph on the GPU, one launch instead of one a call; on "
               "the CPU the same calls again); "
               "dropout draws each micro-batch's masks (Backend::set_rng_stream_base); the "
               "optimizer step (gradient norm, clip, AdamW) likewise, its learning rate uploaded "
               "and its loss and norm read after it (CapturedAdamWStep: optimizer_launches in "
               "--json). Needs "
               "fp32 or bf16, no --profile, --tensor-slice 1 and a warm-up iteration. Without it "
               "the micro-batch is recorded once, not replayed, to count its launches "
               "(launches_per_micro_batch in --json, a CUDA graph's nodes; null on the CPU)");
  app.add_flag("--profile", o.profile,
               "Time every Backend call by phase (forward/backward/optimizer) and kind, GEMMs "
               "by projection and shape, and print where an iteration's time goes");
  for (auto* opt :
       {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--micro-batch", "--global-batch"})
    app.get_option(opt)->check(mtnlg::positive_number());
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  return bench::bench_main("mtnlg-bench-train", [&] { return run(o); });
}
