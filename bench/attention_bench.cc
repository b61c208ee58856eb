// mtnlg-bench-attention: causal attention alone, forward and backward timed apart, through a
// backend's Backend::attention_forward/attention_backward: the CPU's, or on the GPU each of the
// kernel families MTNLG_CUDA_ATTENTION chooses (blocked, flash, flash2), on the shapes of the
// benchmark models. bench/torch_attention.py times PyTorch's scaled_dot_product_attention (its
// FlashAttention-2 kernels on a GPU) on the same shapes: the anchor that says how far each of
// ours is from FA2, which the whole-step figures of mtnlg-bench-train cannot.
//
// TFLOP/s count as FlashAttention's benchmarks do, so that the figures compare with theirs:
// forward 4 b heads s^2 hd / 2 (two products, half of them under the causal mask), backward 2.5
// times that (five products: the recomputed scores, dP, dV, dK, dQ); a kernel that does more
// (ours recompute the scores twice in backward) is charged only these. Exit status: 0 done; 2
// bad flags; 1 other errors.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_backend.h"
#include "cmd/cli_parse.h"
#include "core/backend.h"
#include "core/cuda/attention_workspace.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"

namespace {

using namespace mtnlg;

struct AttnShape {
  std::string name;
  int64_t b = 0, s = 0, heads = 0, hd = 0;
};

// The benchmark models' attention (micro-batch, sequence, heads, head size): those of
// mtnlg-bench-gemm's --models and scripts/gpu/check.sh's rows, and the 530B recipe's on one of
// its 8 tensor ranks (128 heads of 160 over 8, micro-batch 1).
const std::vector<AttnShape> kShapes = {{"demo", 4, 128, 4, 64},
                                        {"gpt2-124m", 1, 1024, 12, 64},
                                        {"gpt2-124m-b8", 8, 1024, 12, 64},
                                        {"1.3b", 4, 2048, 16, 128},
                                        {"530b-tp8", 1, 2048, 16, 160}};

// A preset's name, or BxSxHxD (micro-batch x sequence x heads x head size).
AttnShape parse_shape(const std::string& text) {
  for (const AttnShape& s : kShapes)
    if (s.name == text) return s;
  AttnShape s{text};
  long long v[4];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lldx%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4 ||
      *std::min_element(v, v + 4) <= 0)
    throw invalid_argument(
        "--shapes: '" + text +
            "' is neither demo, gpt2-124m, gpt2-124m-b8, 1.3b or 530b-tp8 nor BxSxHxD "
            "(micro-batch x sequence x heads x head size, each positive)",
        "--shapes");
  s.b = v[0];
  s.s = v[1];
  s.heads = v[2];
  s.hd = v[3];
  return s;
}

struct Options {
  std::string device = "cpu", dtype = "bf16";
  std::vector<std::string> shapes, kernels;
  double dropout = 0.0, min_seconds = 0.5;
  int threads = 0;
  uint64_t seed = 1234;
  bool json = false;
};

struct Result {
  AttnShape shape;
  std::string impl;  // cpu, or the kernels asked for on cuda
  std::string runs;  // the kernels that ran: those asked for where they apply, else blocked
  double fwd_ms = 0.0, bwd_ms = 0.0;
  // Against the first impl of the shape; negative for that one (nothing to compare).
  double max_diff_out = -1.0, max_diff_dqkv = -1.0;
};

double forward_flops(const AttnShape& s) {
  return 4.0 * static_cast<double>(s.b * s.heads * s.hd) * static_cast<double>(s.s) *
         static_cast<double>(s.s) / 2.0;
}

DType dtype_of(const std::string& name) {
  return name == "f32" ? DType::kF32 : name == "f16" ? DType::kF16 : DType::kBF16;
}

uint16_t to_bits(float x, DType dtype) {
  return dtype == DType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x);
}
float from_bits(uint16_t h, DType dtype) {
  return dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// A host tensor with elements drawn from N(0, 1); every impl of a shape gets a copy of it.
Tensor random_host(const Shape& shape, DType dtype, std::mt19937_64& gen) {
  Tensor host = Tensor::cpu(shape, dtype);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (dtype == DType::kF32)
      host.data_as<float>()[i] = dist(gen);
    else
      static_cast<uint16_t*>(host.data())[i] = to_bits(dist(gen), dtype);
  }
  return host;
}

Tensor on(Backend& be, const Tensor& host) {
  Tensor t = be.alloc(host.shape(), host.dtype());
  be.copy(t, host);
  return t;
}

std::vector<float> to_host(Backend& be, const Tensor& t) {
  Tensor host = Tensor::cpu(t.shape(), t.dtype());
  be.copy(host, t);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::kF32 ? host.data_as<float>()[i]
                                    : from_bits(static_cast<uint16_t*>(host.data())[i], t.dtype());
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

// The kernel family the CUDA backend runs for `asked` at this dtype and head size (the planner's
// rule, core/cuda/attention_workspace.h): flash2 or cuDNN where they apply, else blocked.
std::string kernels_run(const std::string& asked, DType dtype, int64_t hd) {
  const auto value_bytes = static_cast<int64_t>(dtype_size(dtype));
  // The bench names the family (MTNLG_CUDA_ATTENTION set), so flash2 takes every head size it has.
  if (asked.starts_with("flash2") && flash2_attention_planned(value_bytes, hd, true)) return asked;
  if (asked == "cudnn" && cudnn_attention_planned(value_bytes, hd)) return "cudnn";
  return "blocked";
}

Result measure(const Options& o, const AttnShape& shape, const std::string& impl,
               const Tensor& host_qkv, const Tensor& host_dout, std::vector<float>* ref_out,
               std::vector<float>* ref_dqkv) {
  // The CUDA backend reads its attention kernels from the environment when it is made: the same
  // switches a training run sets (flash2-128: flash2 with MTNLG_CUDA_FLASH2_ROWS=128;
  // flash2-recompute: flash2 with MTNLG_CUDA_FLASH2_DQ=recompute).
  if (o.device == "cuda") {
    const bool wide = impl == "flash2-128", recompute = impl == "flash2-recompute";
    ::setenv("MTNLG_CUDA_ATTENTION", wide || recompute ? "flash2" : impl.c_str(), 1);
    ::setenv("MTNLG_CUDA_FLASH2_ROWS", wide ? "128" : "64", 1);
    ::setenv("MTNLG_CUDA_FLASH2_DQ", recompute ? "recompute" : "stored", 1);
  }
  auto be = bench::make_bench_backend(o.device, o.threads);
  const DType dtype = dtype_of(o.dtype);
  Tensor qkv = on(*be, host_qkv), dout = on(*be, host_dout);
  Tensor out = be->alloc({shape.b, shape.s, shape.heads * shape.hd}, dtype);
  Tensor stats = be->alloc({shape.b, shape.heads, shape.s}, DType::kF32);
  Tensor dqkv = be->alloc(qkv.shape(), dtype);
  const RngStream rng{o.seed, 7, 0};
  Result r{shape, impl, o.device == "cuda" ? kernels_run(impl, dtype, shape.hd) : "cpu"};
  r.fwd_ms = 1e3 * bench::median_call_seconds(*be, o.min_seconds, [&] {
               be->attention_forward(out, stats, qkv, shape.heads, o.dropout, rng);
             });
  r.bwd_ms = 1e3 * bench::median_call_seconds(*be, o.min_seconds, [&] {
               be->attention_backward(dqkv, dout, qkv, out, stats, shape.heads, o.dropout, rng);
             });
  std::vector<float> got_out = to_host(*be, out), got_dqkv = to_host(*be, dqkv);
  if (ref_out->empty()) {
    *ref_out = std::move(got_out);
    *ref_dqkv = std::move(got_dqkv);
  } else {
    r.max_diff_out = max_abs_diff(*ref_out, got_out);
    r.max_diff_dqkv = max_abs_diff(*ref_dqkv, got_dqkv);
  }
  return r;
}

// A diff for JSON: null where there is none.
std::string json_number(double d) {
  if (d < 0) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", d);
  return buf;
}

int run(Options o) {
  if (o.device == "cpu" && !o.kernels.empty())
    throw invalid_argument(
        "--kernels chooses the CUDA kernels (MTNLG_CUDA_ATTENTION); with --device cpu leave it "
        "out",
        "--kernels");
  if (o.shapes.empty())
    o.shapes = o.device == "cuda" ? std::vector<std::string>{"gpt2-124m-b8", "1.3b", "530b-tp8"}
                                  : std::vector<std::string>{"demo"};
  std::vector<std::string> impls = o.kernels;
  if (impls.empty())
    impls = o.device == "cuda" ? std::vector<std::string>{"blocked", "flash2"}
                               : std::vector<std::string>{"cpu"};
  std::vector<AttnShape> shapes;
  for (const std::string& text : o.shapes) shapes.push_back(parse_shape(text));

  std::vector<Result> results;
  for (const AttnShape& shape : shapes) {
    const DType dtype = dtype_of(o.dtype);
    std::mt19937_64 gen(o.seed);
    const Tensor qkv = random_host({shape.b, shape.s, shape.heads * 3 * shape.hd}, dtype, gen);
    const Tensor dout = random_host({shape.b, shape.s, shape.heads * shape.hd}, dtype, gen);
    std::vector<float> ref_out, ref_dqkv;
    for (const std::string& impl : impls)
      results.push_back(measure(o, shape, impl, qkv, dout, &ref_out, &ref_dqkv));
  }

  std::FILE* text = o.json ? stderr : stdout;
  std::fprintf(text,
               "mtnlg-bench-attention (%s, %s, dropout %g; median call; TFLOP/s as "
               "FlashAttention counts: causal forward 2 b h s^2 d, backward 2.5x)\n",
               o.device.c_str(), o.dtype.c_str(), o.dropout);
  std::fprintf(text, "%-14s %-8s %-8s %9s %9s %9s %9s %9s %10s %10s\n", "shape", "impl", "runs",
               "fwd ms", "bwd ms", "fwd TF/s", "bwd TF/s", "all TF/s", "diff out", "diff dqkv");
  for (const Result& r : results) {
    const double f = forward_flops(r.shape);
    const auto diff = [](double d) {
      char buf[32];
      std::snprintf(buf, sizeof buf, d < 0 ? "-" : "%.2e", d);
      return std::string(buf);
    };
    std::fprintf(text, "%-14s %-8s %-8s %9.3f %9.3f %9.3f %9.3f %9.3f %10s %10s\n",
                 r.shape.name.c_str(), r.impl.c_str(), r.runs.c_str(), r.fwd_ms, r.bwd_ms,
                 f / r.fwd_ms * 1e-9, 2.5 * f / r.bwd_ms * 1e-9,
                 3.5 * f / (r.fwd_ms + r.bwd_ms) * 1e-9, diff(r.max_diff_out).c_str(),
                 diff(r.max_diff_dqkv).c_str());
  }
  if (o.json) {
    for (const Result& r : results) {
      const double f = forward_flops(r.shape);
      std::printf(
          "{\"bench\":\"attention\",\"impl\":\"mtnlg\",\"kernels\":\"%s\",\"runs\":\"%s\","
          "\"device\":\"%s\",\"dtype\":\"%s\",\"dropout\":%g,\"name\":\"%s\",\"b\":%lld,"
          "\"s\":%lld,\"heads\":%lld,\"hd\":%lld,\"fwd_ms\":%.5f,\"bwd_ms\":%.5f,"
          "\"fwd_tflops\":%.4f,\"bwd_tflops\":%.4f,\"max_diff_out\":%s,"
          "\"max_diff_dqkv\":%s}\n",
          r.impl.c_str(), r.runs.c_str(), o.device.c_str(), o.dtype.c_str(), o.dropout,
          r.shape.name.c_str(), (long long)r.shape.b, (long long)r.shape.s,
          (long long)r.shape.heads, (long long)r.shape.hd, r.fwd_ms, r.bwd_ms, f / r.fwd_ms * 1e-9,
          2.5 * f / r.bwd_ms * 1e-9, json_number(r.max_diff_out).c_str(),
          json_number(r.max_diff_dqkv).c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-bench-attention: causal attention's forward and backward timed apart through a "
      "backend (the CPU's, or with --device cuda each kernel family of MTNLG_CUDA_ATTENTION), "
      "with TFLOP/s counted as FlashAttention's benchmarks count them; bench/torch_attention.py "
      "times PyTorch's scaled_dot_product_attention on the same shapes. Each impl's output and "
      "gradient are compared with the first impl's of the shape (diff columns)."};
  Options o;
  app.add_option("--shapes", o.shapes,
                 "Comma-separated: demo (4x128x4x64), gpt2-124m (1x1024x12x64), gpt2-124m-b8 "
                 "(8x1024x12x64), 1.3b (4x2048x16x128), 530b-tp8 (1x2048x16x160: the 530B "
                 "recipe's on one of 8 tensor ranks), or BxSxHxD (micro-batch x sequence x heads x "
                 "head size) (default: demo on cpu; gpt2-124m-b8,1.3b,530b-tp8 on cuda)")
      ->delimiter(',');
  app.add_option("--kernels", o.kernels,
                 "With --device cuda: comma-separated kernel families to time, "
                 "MTNLG_CUDA_ATTENTION's blocked, flash2, flash2-128 (flash2 with "
                 "MTNLG_CUDA_FLASH2_ROWS=128: the forward's 128-row blocks) and "
                 "flash2-recompute (flash2 with MTNLG_CUDA_FLASH2_DQ=recompute: the backward's "
                 "dq pass recomputing dS) and cudnn (cuDNN's fused attention; with dropout its "
                 "own masks, so its diff against the others is not a check) (default: "
                 "blocked,flash2); the runs column says which ran (blocked where the asked ones "
                 "do not apply)")
      ->delimiter(',')
      ->check(CLI::IsMember({"blocked", "flash2", "flash2-128", "flash2-recompute", "cudnn"}));
  app.add_option("--device", o.device, "cpu, or cuda (GPU 0; needs a CUDA build)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "bf16, f16 or f32: q, k, v, the output and the gradients")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}))
      ->capture_default_str();
  app.add_option("--dropout", o.dropout,
                 "Attention dropout probability (Megatron's 0.1), drawn in forward and "
                 "regenerated in backward; 0: none")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_option("--min-time", o.min_seconds,
                 "Seconds to spend timing each of forward and backward (at least 3 calls)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU backend threads (0: all cores)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the inputs and the dropout")->capture_default_str();
  app.add_flag("--json", o.json,
               "Print one JSON line per row on stdout (the table goes to stderr)");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  return bench::bench_main("mtnlg-bench-attention", [&] { return run(o); });
}
