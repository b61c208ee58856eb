// mtnlg-bench-gemm: fp32 (or, with --dtype bf16, bf16 operands with fp32 sums and output) GEMM
// GFLOP/s through the CPU backend's Backend::gemm for the shapes a training step of each
// benchmark model issues (bench/model_gemms.h), on a given thread count.
// The best rate is this machine's practical ceiling for the trainer: bench/run.sh reports each
// model's achieved TFLOP/s as a share of it. Exit status: 0 done; 2 bad flags; 1 other errors.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_backend.h"
#include "bench/model_gemms.h"
#include "cmd/cli_parse.h"
#include "core/backend.h"
#include "core/kernels/bf16_math.h"

namespace {

using namespace mtnlg;

// The models of bench/run.sh: one micro-batch's tokens, hidden size, padded vocabulary.
struct ModelShape {
  const char* name;
  int64_t tokens, hidden, vocab;
};
constexpr ModelShape kModels[] = {{"demo", 4 * 128, 256, 50304},
                                  {"gpt2-124m", 1 * 1024, 768, 50304},
                                  // The GPU runs of scripts/gpu/check.sh: micro-batch 8 x 1024,
                                  // and the 1.3B recipe's 4 x 2048.
                                  {"gpt2-124m-b8", 8 * 1024, 768, 50304},
                                  {"1.3b", 4 * 2048, 2048, 50304}};

struct Result {
  std::string model;
  bench::GemmShape shape;
  double ms = 0.0;  // median call
  double gflops = 0.0;
};

Tensor random_matrix(Backend& be, int64_t rows, int64_t cols, DType dtype, std::mt19937& gen) {
  Tensor host = Tensor::cpu({rows, cols}, dtype);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (dtype == DType::kBF16)
      static_cast<uint16_t*>(host.data())[i] = f32_to_bf16(dist(gen));
    else
      host.data_as<float>()[i] = dist(gen);
  }
  Tensor t = be.alloc({rows, cols}, dtype);
  be.copy(t, host);
  return t;
}

// Median time of one call, over as many calls as fit in min_seconds (at least 3), after one
// untimed call.
double time_gemm(Backend& be, const bench::GemmShape& s, DType dtype, double min_seconds,
                 std::mt19937& gen) {
  // Stored (untransposed) operands: op(a) is [m, k], op(b) is [k, n]; the output is f32.
  Tensor a =
      s.trans_a ? random_matrix(be, s.k, s.m, dtype, gen) : random_matrix(be, s.m, s.k, dtype, gen);
  Tensor b =
      s.trans_b ? random_matrix(be, s.n, s.k, dtype, gen) : random_matrix(be, s.k, s.n, dtype, gen);
  Tensor c = be.alloc({s.m, s.n}, DType::kF32);
  return bench::median_call_seconds(be, min_seconds,
                                    [&] { be.gemm(c, a, s.trans_a, b, s.trans_b, 1.0, s.beta); });
}

int run(const std::vector<std::string>& models, int threads, double min_seconds, bool json,
        DType dtype, const std::string& device) {
  auto be = bench::make_bench_backend(device, threads);
  std::mt19937 gen(1234);
  std::vector<Result> results;
  for (const std::string& name : models) {
    const auto it = std::find_if(std::begin(kModels), std::end(kModels),
                                 [&](const ModelShape& m) { return m.name == name; });
    if (it == std::end(kModels))
      throw invalid_argument(
          "unknown model '" + name + "'; use demo, gpt2-124m, gpt2-124m-b8 or 1.3b", "--models");
    for (const auto& s : bench::model_gemms(it->tokens, it->hidden, 4 * it->hidden, it->vocab)) {
      const double sec = time_gemm(*be, s, dtype, min_seconds, gen);
      results.push_back({name, s, 1e3 * sec, s.flops() / sec * 1e-9});
    }
  }
  const Result& best =
      *std::max_element(results.begin(), results.end(),
                        [](const Result& a, const Result& b) { return a.gflops < b.gflops; });

  std::FILE* text = json ? stderr : stdout;
  std::fprintf(text, "mtnlg-bench-gemm (%s, %s, median of >= 3 calls per shape)\n",
               be->name().c_str(), dtype == DType::kBF16 ? "bf16 x bf16 -> f32" : "f32");
  std::fprintf(text, "%-10s %-11s %2s %6s %6s %6s %10s %9s\n", "model", "gemm", "op", "m", "n", "k",
               "ms", "GFLOP/s");
  for (const Result& r : results) {
    const std::string op = std::string(r.shape.trans_a ? "T" : "N") + (r.shape.trans_b ? "T" : "N");
    std::fprintf(text, "%-10s %-11s %2s %6lld %6lld %6lld %10.3f %9.1f\n", r.model.c_str(),
                 r.shape.label.c_str(), op.c_str(), (long long)r.shape.m, (long long)r.shape.n,
                 (long long)r.shape.k, r.ms, r.gflops);
  }
  std::fprintf(text, "ceiling (best shape): %.1f GFLOP/s (%s %s)\n", best.gflops,
               best.model.c_str(), best.shape.label.c_str());
  if (json) {
    std::printf(
        "{\"impl\":\"gemm\",\"device\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,"
        "\"ceiling_gflops\":%.3f,\"best\":\"%s %s\",\"shapes\":[",
        device.c_str(), dtype_name(dtype), threads, best.gflops, best.model.c_str(),
        best.shape.label.c_str());
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf(
          "%s{\"model\":\"%s\",\"gemm\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
          "\"ms\":%.4f,\"gflops\":%.3f}",
          i ? "," : "", r.model.c_str(), r.shape.label.c_str(), (long long)r.shape.m,
          (long long)r.shape.n, (long long)r.shape.k, r.ms, r.gflops);
    }
    std::printf("]}\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-bench-gemm: fp32 (or bf16) GEMM GFLOP/s through a backend's Backend::gemm (the "
      "CPU's, or with --device cuda the GPU's cuBLAS) for the forward, input-grad and "
      "weight-grad GEMMs of qkv, dense, fc1, fc2 and the tied LM head of the benchmark models. "
      "The best rate is the machine's practical ceiling."};
  std::vector<std::string> models = {"demo", "gpt2-124m"};
  int threads = 0;
  double min_seconds = 0.5;
  bool json = false;
  app.add_option("--models", models,
                 "Models whose shapes to time: demo (512 tokens, h 256, V_pad 50304), "
                 "gpt2-124m (1024 tokens, h 768), gpt2-124m-b8 (8192 tokens, h 768), 1.3b (8192 "
                 "tokens, h 2048)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU backend threads (0: all cores)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--min-time", min_seconds, "Seconds to spend timing each shape (at least 3 calls)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_flag("--json", json, "Print one JSON line on stdout (the table goes to stderr)");
  std::string dtype = "f32";
  app.add_option("--dtype", dtype,
                 "f32, or bf16: bf16 operands, fp32 sums and output (oneDNN matmul)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  std::string device = "cpu";
  app.add_option("--device", device, "cpu, or cuda (GPU 0; needs a CUDA build)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  return bench::bench_main("mtnlg-bench-gemm", [&] {
    return run(models, threads, min_seconds, json, dtype == "bf16" ? DType::kBF16 : DType::kF32,
               device);
  });
}
