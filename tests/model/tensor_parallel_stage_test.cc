// Tensor parallelism of a whole GPTStage (parallel/mappings.h, model/vocab_parallel.h): tp = 2
// and 4 ranks, as threads over a MemoryStore with Gloo communicators, must give the single
// rank's loss, every gradient shard (checked at its global index) and the squared grad norm, with
// dropout on (the attention-probs masks are keyed by the global head). Float64, so any
// difference beyond reduction order is a bug. Worker threads never touch Catch.
#include <catch2/catch.hpp>

#include <cmath>
#include <exception>
#include <functional>
#include <thread>

#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "parallel/gloo_communicator.h"
#include "parallel/mappings.h"
#include "parallel/store.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

using test::run_ranks;

const std::chrono::milliseconds kTimeout(20000);

std::unique_ptr<Communicator> group(MemoryStore& store, int rank, int n) {
  std::vector<int64_t> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  return make_gloo_communicator(store, "tensor", rank, ranks, kTimeout);
}

GPTConfig tiny_config() {
  GPTConfig c;
  c.num_layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.ffn = 64;
  c.seq = 8;
  c.max_positions = 8;
  c.vocab = 60;  // padded to 64: the last shard holds padding columns
  c.padded_vocab = 64;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  return c;
}

struct Result {
  double loss = 0.0;
  double norm = 0.0;                       // this rank's part of the squared grad norm
  std::vector<std::vector<double>> grads;  // per parameter, local elements
  std::vector<ParamSpec> specs;
};

// Two micro-batches of forward + backward on a stage of tp ranks (tensor may be null).
Result train_once(GPTConfig c, Communicator* tensor) {
  if (tensor != nullptr) {
    c.tp_size = tensor->size();
    c.tp_rank = tensor->rank();
  }
  auto backend = make_cpu_backend(1);
  GPTStage stage(c, full_model(c), *backend, DType::kF64, 1234, tensor);
  stage.init_weights(99);
  StageActivations acts = stage.make_activations(2);
  Result r;
  for (int m = 0; m < 2; ++m) {
    r.loss += stage.forward(acts, test::token_ids(2, c.seq, c.vocab, m),
                            test::token_ids(2, c.seq, c.vocab, m + 7), static_cast<uint64_t>(m));
    stage.backward(acts, Tensor(), 1.0 / 32.0);
  }
  for (const auto& p : stage.params().params()) {
    // This rank's share of the squared global norm: shards all, replicated ones on rank 0.
    if (p.spec.partition_dim >= 0 || c.tp_rank == 0) r.norm += backend->sum_squares(p.grad);
    std::vector<double> g(static_cast<size_t>(p.grad.numel()));
    for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] = p.grad.data_as<double>()[i];
    r.grads.push_back(std::move(g));
    r.specs.push_back(p.spec);
  }
  return r;
}

TEST_CASE("tensor-parallel GPTStage matches one rank - loss, grads and grad norm") {
  const GPTConfig c = tiny_config();
  const Result ref = train_once(c, nullptr);
  for (int tp : {2, 4}) {
    INFO("tp " << tp);
    MemoryStore store;
    std::vector<Result> results(tp);
    run_ranks(tp, [&](int rank) {
      auto tensor = group(store, rank, tp);
      results[rank] = train_once(c, tensor.get());
    });
    double squares = 0.0;
    for (const Result& r : results) squares += r.norm;
    CHECK(squares == Approx(ref.norm).epsilon(1e-12));
    for (int rank = 0; rank < tp; ++rank) {
      const Result& r = results[rank];
      CHECK(r.loss == Approx(ref.loss).epsilon(1e-12));
      REQUIRE(r.specs.size() == ref.specs.size());
      for (size_t p = 0; p < r.specs.size(); ++p) {
        INFO(r.specs[p].name << " rank " << rank);
        double worst = 0.0;
        for (size_t i = 0; i < r.grads[p].size(); ++i) {
          const int64_t g = global_index(r.specs[p], static_cast<int64_t>(i));
          worst = std::max(worst, std::abs(r.grads[p][i] - ref.grads[p][static_cast<size_t>(g)]));
        }
        CHECK(worst < 1e-12);
      }
    }
  }
}

TEST_CASE("tensor-parallel mappings - copy_to backward and reduce_from forward sum the group") {
  for (int n : {1, 2, 3}) {
    MemoryStore store;
    std::vector<std::vector<float>> got(n);
    run_ranks(n, [&](int rank) {
      auto backend = make_cpu_backend(1);
      auto tensor = group(store, rank, n);
      Tensor a = Tensor::cpu({2, 3}, DType::kF32), b = Tensor::cpu({2, 3}, DType::kF32);
      for (int i = 0; i < 6; ++i) a.data_as<float>()[i] = b.data_as<float>()[i] = rank + i;
      copy_to_tensor_region_forward(*backend, a, tensor.get());       // identity
      reduce_from_tensor_region_backward(*backend, b, tensor.get());  // identity
      for (int i = 0; i < 6; ++i)
        if (a.data_as<float>()[i] != rank + i || b.data_as<float>()[i] != rank + i)
          throw std::runtime_error("identity half changed its tensor");
      copy_to_tensor_region_backward(*backend, a, tensor.get());
      reduce_from_tensor_region_forward(*backend, b, tensor.get());
      for (int i = 0; i < 6; ++i) got[rank].push_back(a.data_as<float>()[i]);
      for (int i = 0; i < 6; ++i) got[rank].push_back(b.data_as<float>()[i]);
    });
    for (int rank = 0; rank < n; ++rank)
      for (int i = 0; i < 12; ++i) {
        const int e = i % 6;
        CHECK(got[rank][i] == Approx(n * e + n * (n - 1) / 2));
      }
  }
  // A null group is a no-op.
  auto backend = make_cpu_backend(1);
  Tensor t = Tensor::cpu({1}, DType::kF32);
  t.data_as<float>()[0] = 3;
  reduce_from_tensor_region_forward(*backend, t, nullptr);
  copy_to_tensor_region_backward(*backend, t, nullptr);
  CHECK(t.data_as<float>()[0] == 3);
}

}  // namespace
}  // namespace mtnlg
