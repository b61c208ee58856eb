// ZeroAdamW against AdamW: data-parallel ranks as threads over one MemoryStore (Gloo), each with
// its own gradient; every rank must end with bitwise the parameters that AdamW on one rank gives
// with the summed gradient. Worker threads never touch Catch (not thread-safe): they record
// results, the main thread checks.
#include "optim/zero_optimizer.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <thread>

#include "core/kernels/bf16_math.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using test::run_ranks;

struct Spec {
  const char* name;
  Shape shape;
  bool no_decay;
};

// Parameters with odd sizes (38 elements: dp = 3 and 4 need padding), decay and no_decay mixed.
const std::vector<Spec> kSpecs = {
    {"w1", {3, 5}, false}, {"b1", {5}, true}, {"w2", {7, 2}, false}, {"ln", {4}, true}};
const std::vector<Spec> kTiny = {{"w", {1}, false}, {"b", {1}, true}};  // N = 2 < dp

// pad: the gradient buffer padded to a multiple of the data size, as ZeRO-1's GradSync needs.
void build(ParamRegistry& reg, Backend& be, const std::vector<Spec>& specs, int64_t pad = 1) {
  for (const Spec& s : specs) reg.add({s.name, s.shape, s.shape, -1, s.no_decay, 0.0, 0.0});
  reg.allocate(be, DType::kF32, DType::kF32, pad);
  int64_t k = 0;
  for (auto& p : reg.params()) {
    float* v = p.value.data_as<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i, ++k)
      v[i] = static_cast<float>(0.37 * static_cast<double>(k % 13) - 1.9);
  }
}

// Rank r's gradient of flat element k at step s: multiples of 1/64, so their sum is exact in any
// order and the summed gradient does not depend on how the collective adds.
double grad_value(int rank, int64_t k, int step) {
  return static_cast<double>((rank * 5 + k * 3 + step * 7) % 17 - 8) / 64.0;
}

void set_grads(ParamRegistry& reg, const std::function<double(int64_t)>& g) {
  int64_t k = 0;
  for (auto& p : reg.params()) {
    float* d = p.grad.data_as<float>();
    for (int64_t i = 0; i < p.grad.numel(); ++i, ++k) d[i] = static_cast<float>(g(k));
  }
}

std::vector<float> flat_values(const ParamRegistry& reg) {
  std::vector<float> out;
  for (const auto& p : reg.params()) {
    const float* v = p.value.data_as<float>();
    out.insert(out.end(), v, v + p.value.numel());
  }
  return out;
}

OptimizerConfig config() {
  OptimizerConfig c;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  return c;
}

constexpr int kSteps = 3;
const double kLr[kSteps] = {1e-2, 5e-3, 2e-3};
const double kScale[kSteps] = {1.0, 0.5, 0.25};  // clip coefficients

struct Reference {
  std::vector<float> values;
  std::vector<double> norms;
  std::vector<double> norms_without_first;  // the first parameter left out (a tied copy)
  int64_t state_bytes = 0;
};

// The GradSync that reduce-scatters `reg`'s gradient buffer over `data` (mode kReduceScatter
// unless told otherwise), as the trainer builds it.
std::unique_ptr<GradSync> grad_sync(ParamRegistry& reg, Communicator& data,
                                    GradSync::Mode mode = GradSync::Mode::kReduceScatter) {
  std::vector<Tensor> grads;
  for (const auto& p : reg.params()) grads.push_back(p.grad);
  return std::make_unique<GradSync>(std::move(grads), data, mode, GradSync::kDefaultBucketBytes,
                                    reg.grad_buffer());
}

// AdamW on one rank with the summed gradient of dp ranks.
Reference reference(int dp, const std::vector<Spec>& specs) {
  auto be = make_cpu_backend(1);
  ParamRegistry reg;
  build(reg, *be, specs);
  AdamW opt(reg, *be, config());
  Reference ref;
  for (int s = 0; s < kSteps; ++s) {
    set_grads(reg, [&](int64_t k) {
      double sum = 0.0;
      for (int r = 0; r < dp; ++r) sum += grad_value(r, k, s);
      return sum;
    });
    ref.norms.push_back(global_grad_norm(*be, reg));
    reg.params().front().spec.tied = Tied::kCopy;
    ref.norms_without_first.push_back(global_grad_norm(*be, reg));
    reg.params().front().spec.tied = Tied::kNone;
    opt.step(kLr[s], kScale[s]);
  }
  ref.values = flat_values(reg);
  ref.state_bytes = opt.state_bytes();
  return ref;
}

struct RankResult {
  std::vector<float> values;
  std::vector<double> norms;
  std::vector<double> norms_without_first;
  int64_t state_bytes = 0, partition_size = 0, partition_begin = 0, numel = 0;
};

std::vector<RankResult> run_zero(int dp, const std::vector<Spec>& specs) {
  MemoryStore store;
  std::vector<RankResult> results(dp);
  std::vector<int64_t> ranks(dp);
  for (int r = 0; r < dp; ++r) ranks[r] = r;
  run_ranks(dp, [&](int rank) {
    auto data = make_gloo_communicator(store, "data", rank, ranks, std::chrono::seconds(20));
    auto be = make_cpu_backend(1);
    ParamRegistry reg;
    build(reg, *be, specs, dp);
    const auto sync = grad_sync(reg, *data);
    ZeroAdamW opt(reg, *be, config(), *sync, *data);
    RankResult& out = results[rank];
    for (int s = 0; s < kSteps; ++s) {
      set_grads(reg, [&](int64_t k) { return grad_value(rank, k, s); });
      sync->wait(*be);
      // The norm only reads the reduced partition, so it may run twice.
      reg.params().front().spec.tied = Tied::kCopy;
      out.norms_without_first.push_back(opt.grad_norm());
      reg.params().front().spec.tied = Tied::kNone;
      out.norms.push_back(opt.grad_norm());
      opt.step(kLr[s], kScale[s]);
    }
    out.values = flat_values(reg);
    out.state_bytes = opt.state_bytes();
    out.partition_size = opt.partition_size();
    out.partition_begin = opt.partition_begin();
    out.numel = opt.numel();
  });
  return results;
}

void check_matches_adamw(int dp, const std::vector<Spec>& specs) {
  INFO("dp " << dp);
  const Reference ref = reference(dp, specs);
  const std::vector<RankResult> results = run_zero(dp, specs);
  const auto n = static_cast<int64_t>(ref.values.size());
  const int64_t shard = (n + dp - 1) / dp;
  for (int r = 0; r < dp; ++r) {
    INFO("rank " << r);
    const RankResult& got = results[r];
    CHECK(got.numel == n);
    CHECK(got.partition_size == shard);
    CHECK(got.partition_begin == r * shard);
    // Two moments of the partition only: 1/dp of AdamW's (plus at most dp - 1 padding).
    CHECK(got.state_bytes == 2 * shard * static_cast<int64_t>(sizeof(float)));
    CHECK(got.state_bytes * dp >= ref.state_bytes);
    CHECK(got.state_bytes * dp < ref.state_bytes + 2 * dp * static_cast<int64_t>(sizeof(float)));
    REQUIRE(got.values.size() == ref.values.size());
    for (int s = 0; s < kSteps; ++s) {
      CHECK(got.norms[s] == Approx(ref.norms[s]).epsilon(1e-12));
      CHECK(got.norms_without_first[s] == Approx(ref.norms_without_first[s]).epsilon(1e-12));
      CHECK(got.norms_without_first[s] < got.norms[s]);
    }
    // Bitwise: the same kernel on the same summed gradient.
    CHECK(std::memcmp(got.values.data(), ref.values.data(), ref.values.size() * sizeof(float)) ==
          0);
    for (size_t i = 0; i < ref.values.size(); ++i) {
      if (got.values[i] == ref.values[i]) continue;
      FAIL_CHECK("element " << i << ": " << got.values[i] << " vs " << ref.values[i]);
      break;
    }
  }
}

TEST_CASE("ZeroAdamW equals AdamW on the summed gradient - dp 1 to 4, with padding") {
  for (int dp : {1, 2, 3, 4}) check_matches_adamw(dp, kSpecs);
}

TEST_CASE("ZeroAdamW with fewer elements than ranks - some partitions are all padding") {
  check_matches_adamw(3, kTiny);
}

// tensor 2 x data 2 (4 threads): a row-sharded weight and a replicated LayerNorm. The norm must be
// the whole model's: shards summed over the tensor group, the replicated gradient (identical on
// both tensor ranks, as in a real model) counted once, every gradient summed over the data group.
TEST_CASE("ZeroAdamW's norm under tensor 2 x data 2 equals the global gradient norm") {
  constexpr int kTp = 2, kDp = 2;
  // Gradient of element k of the (global) parameter on data rank d: multiples of 1/64, exact.
  const auto g = [](int param, int64_t global_k, int d) {
    return static_cast<double>((param * 11 + global_k * 3 + d * 5) % 13 - 6) / 64.0;
  };
  // The reference: the data-summed global gradient's L2 norm.
  double sum_sq = 0.0;
  for (int64_t k = 0; k < 12; ++k) {  // w: [4, 3]
    const double v = g(0, k, 0) + g(0, k, 1);
    sum_sq += v * v;
  }
  for (int64_t k = 0; k < 5; ++k) {  // ln: [5]
    const double v = g(1, k, 0) + g(1, k, 1);
    sum_sq += v * v;
  }
  const double want = std::sqrt(sum_sq);

  MemoryStore store;
  std::vector<double> norms(kTp * kDp, -1.0);
  run_ranks(kTp * kDp, [&](int rank) {
    const int tp = rank % kTp, dp = rank / kTp;
    auto tensor = make_gloo_communicator(store, "tensor-" + std::to_string(dp), tp,
                                         {dp * kTp, dp * kTp + 1}, std::chrono::seconds(20));
    auto data = make_gloo_communicator(store, "data-" + std::to_string(tp), dp, {tp, tp + kTp},
                                       std::chrono::seconds(20));
    auto be = make_cpu_backend(1);
    ParamRegistry reg;
    reg.add({"w", {4, 3}, {2, 3}, 0, false, 0.0, 0.0, tp});
    reg.add({"ln", {5}, {5}, -1, true, 0.0, 0.0});
    reg.allocate(*be, DType::kF32, DType::kF32, kDp);
    float* gw = reg.get("w").grad.data_as<float>();
    for (int64_t k = 0; k < 6; ++k) gw[k] = static_cast<float>(g(0, tp * 6 + k, dp));
    float* gl = reg.get("ln").grad.data_as<float>();
    for (int64_t k = 0; k < 5; ++k) gl[k] = static_cast<float>(g(1, k, dp));
    const auto sync = grad_sync(reg, *data);
    ZeroAdamW opt(reg, *be, config(), *sync, *data, tensor.get());
    sync->wait(*be);
    norms[rank] = opt.grad_norm();
  });
  for (int r = 0; r < kTp * kDp; ++r) {
    INFO("rank " << r);
    CHECK(norms[r] == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("bf16 values: ZeRO-1 over 2 and 3 ranks equals one rank's AdamW on fp32 masters") {
  // Values bf16 (starting bf16-representable), gradients fp32; every rank's updated values and
  // the masters of its partition must equal the one-rank mixed AdamW's on the summed gradient.
  const auto make = [](ParamRegistry& reg, Backend& be, int64_t pad) {
    for (const Spec& s : kSpecs) reg.add({s.name, s.shape, s.shape, -1, s.no_decay, 0.0, 0.0});
    reg.allocate(be, DType::kBF16, DType::kF32, pad);
    int64_t k = 0;
    for (auto& p : reg.params()) {
      auto* bits = static_cast<uint16_t*>(p.value.data());
      for (int64_t i = 0; i < p.value.numel(); ++i, ++k)
        bits[i] = f32_to_bf16(static_cast<float>(0.37 * static_cast<double>(k % 13) - 1.9));
    }
  };
  const auto values = [](const ParamRegistry& reg) {
    std::vector<uint16_t> out;
    for (const auto& p : reg.params()) {
      const auto* bits = static_cast<const uint16_t*>(p.value.data());
      out.insert(out.end(), bits, bits + p.value.numel());
    }
    return out;
  };
  for (int dp : {2, 3}) {
    INFO("dp " << dp);
    auto be = make_cpu_backend(1);
    ParamRegistry ref;
    make(ref, *be, 1);
    AdamW adam(ref, *be, config());
    for (int s = 0; s < kSteps; ++s) {
      set_grads(ref, [&](int64_t k) {
        double sum = 0.0;
        for (int r = 0; r < dp; ++r) sum += grad_value(r, k, s);
        return sum;
      });
      adam.step(kLr[s], kScale[s]);
    }
    std::vector<float> ref_masters;
    for (const Tensor& m : adam.masters())
      ref_masters.insert(ref_masters.end(), m.data_as<float>(), m.data_as<float>() + m.numel());

    MemoryStore store;
    std::vector<std::vector<uint16_t>> got(static_cast<size_t>(dp));
    std::vector<std::vector<float>> masters(static_cast<size_t>(dp));
    std::vector<int64_t> begin(static_cast<size_t>(dp));
    std::vector<int64_t> ranks(static_cast<size_t>(dp));
    for (int r = 0; r < dp; ++r) ranks[static_cast<size_t>(r)] = r;
    run_ranks(dp, [&](int rank) {
      auto data = make_gloo_communicator(store, "data", rank, ranks, std::chrono::seconds(20));
      auto rbe = make_cpu_backend(1);
      ParamRegistry reg;
      make(reg, *rbe, dp);
      const auto sync = grad_sync(reg, *data);
      ZeroAdamW opt(reg, *rbe, config(), *sync, *data);
      for (int s = 0; s < kSteps; ++s) {
        set_grads(reg, [&](int64_t k) { return grad_value(rank, k, s); });
        sync->wait(*rbe);
        opt.step(kLr[s], kScale[s]);
      }
      got[static_cast<size_t>(rank)] = values(reg);
      begin[static_cast<size_t>(rank)] = opt.partition_begin();
      for (const StateTensor& st : opt.state())
        if (st.name.rfind("master.", 0) == 0)
          masters[static_cast<size_t>(rank)].insert(masters[static_cast<size_t>(rank)].end(),
                                                    st.tensor.data_as<float>(),
                                                    st.tensor.data_as<float>() + st.tensor.numel());
    });
    const std::vector<uint16_t> want = values(ref);
    std::vector<float> all_masters;
    for (int r = 0; r < dp; ++r) {
      CHECK(got[static_cast<size_t>(r)] == want);
      all_masters.insert(all_masters.end(), masters[static_cast<size_t>(r)].begin(),
                         masters[static_cast<size_t>(r)].end());
    }
    // The ranks' master pieces, in rank order, are the whole flat vector of masters.
    CHECK(all_masters == ref_masters);
  }
}

TEST_CASE("mixed dtypes, or grads that are not the registry's buffer, are refused") {
  MemoryStore store;
  auto data = make_gloo_communicator(store, "data", 0, {0}, std::chrono::seconds(20));
  auto be = make_cpu_backend(1);
  ParamRegistry reg;
  reg.add({"a", {2}, {2}, -1, false, 0.0, 0.0});
  reg.add({"b", {3}, {3}, -1, false, 0.0, 0.0});
  reg.allocate(*be, DType::kF32);
  {
    const auto sync = grad_sync(reg, *data);
    CHECK_NOTHROW(ZeroAdamW(reg, *be, config(), *sync, *data));
  }
  reg.get("b").grad = be->alloc({3}, DType::kF32);  // its own tensor, not the buffer's piece
  CHECK_THROWS_WITH(grad_sync(reg, *data),
                    Catch::Contains("gradient 1 is not the next piece of the gradient buffer"));
  reg.get("b").grad = be->alloc({3}, DType::kF64);
  CHECK_THROWS_WITH(grad_sync(reg, *data), Catch::Contains("gradient 1 f64[3]"));
}

// One data rank ("one") and a registry of one 4-element parameter, allocated.
struct OneRank {
  MemoryStore store;
  std::unique_ptr<Communicator> one =
      make_gloo_communicator(store, "one", 0, {0}, std::chrono::seconds(20));
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  ParamRegistry reg;
  OneRank() {
    reg.add({"a", {4}, {4}, -1, false, 0.0, 0.0});
    reg.allocate(*be, DType::kF32);
  }
};

TEST_CASE("ZeroAdamW needs a GradSync that reduce-scatters its registry") {
  OneRank f;
  const auto all_reduce = grad_sync(f.reg, *f.one, GradSync::Mode::kAfterBackward);
  CHECK_THROWS_WITH(ZeroAdamW(f.reg, *f.be, config(), *all_reduce, *f.one),
                    Catch::Contains("does not reduce-scatter"));
}

TEST_CASE("make_optimizer: ZeRO-1 when GradSync reduce-scatters - else AdamW") {
  OneRank f;
  const auto all_reduce = grad_sync(f.reg, *f.one, GradSync::Mode::kAfterBackward);
  for (GradSync* sync : {static_cast<GradSync*>(nullptr), all_reduce.get()}) {
    const auto opt = make_optimizer(f.reg, *f.be, config(), sync, f.one.get(), nullptr);
    CHECK(opt->describe() == "AdamW");
    CHECK_FALSE(opt->partitioned());
  }
  std::vector<std::string> described(2);
  std::vector<int> partitioned(2);
  run_ranks(2, [&](int rank) {
    auto data = make_gloo_communicator(f.store, "data", rank, {0, 1}, std::chrono::seconds(20));
    auto rank_be = make_cpu_backend(1);
    ParamRegistry r;
    r.add({"a", {4}, {4}, -1, false, 0.0, 0.0});
    r.allocate(*rank_be, DType::kF32, DType::kF32, 2);
    const auto scatter = grad_sync(r, *data);
    const auto zero = make_optimizer(r, *rank_be, config(), scatter.get(), data.get(), nullptr);
    described[static_cast<size_t>(rank)] = zero->describe();
    partitioned[static_cast<size_t>(rank)] = zero->partitioned();
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(described[static_cast<size_t>(r)] == "AdamW with ZeRO-1 over 2 data ranks");
    CHECK(partitioned[static_cast<size_t>(r)] == 1);
  }
}

}  // namespace
}  // namespace mtnlg
