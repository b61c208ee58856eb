// The vocab-parallel cross entropy (model/vocab_parallel.h) against the backend's cross entropy
// over full rows: the local steps combined by hand (no group), and tp = 2 and 4 ranks as threads
// over a MemoryStore with Gloo communicators, padding columns included.
#include "model/vocab_parallel.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <thread>

#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"
#include "tests/core/kernel_check.h"

namespace mtnlg {
namespace {

using test::run_ranks;

constexpr int64_t kRows = 5, kPadded = 24, kVocab = 21;

double logit(int64_t r, int64_t c) {
  return std::sin(0.7 * r + 1.3 * c) * 3.0 + 0.1 * c;
}

Tensor full_logits() {
  Tensor t = Tensor::cpu({kRows, kPadded}, DType::kF64);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kPadded; ++c)
      t.data_as<double>()[r * kPadded + c] = c < kVocab ? logit(r, c) : 1e3;  // padding is huge
  return t;
}

Tensor shard_of(const Tensor& full, int64_t start, int64_t size) {
  Tensor t = Tensor::cpu({kRows, size}, DType::kF64);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < size; ++j)
      t.data_as<double>()[r * size + j] = full.data_as<double>()[r * kPadded + start + j];
  return t;
}

Tensor targets() {
  Tensor t = Tensor::cpu({kRows}, DType::kI32);
  const int32_t v[kRows] = {0, 20, 7, 12, 19};
  for (int i = 0; i < kRows; ++i) t.data_as<int32_t>()[i] = v[i];
  return t;
}

TEST_CASE("vocab-parallel cross entropy matches the full-row cross entropy over 2 and 4 ranks") {
  auto backend = make_cpu_backend(1);
  const Tensor full = full_logits(), tgt = targets();
  const double ref_loss = backend->cross_entropy_forward(full, tgt, kVocab);
  Tensor ref_grad = Tensor::cpu({kRows, kPadded}, DType::kF64);
  backend->cross_entropy_backward(ref_grad, full, tgt, kVocab, 0.5);

  for (int tp : {1, 2, 4}) {
    INFO("tp " << tp);
    const int64_t size = kPadded / tp;
    MemoryStore store;
    std::vector<double> losses(tp);
    std::vector<Tensor> grads(tp);
    run_ranks(tp, [&](int rank) {
      std::vector<int64_t> ranks(tp);
      for (int i = 0; i < tp; ++i) ranks[i] = i;
      auto group =
          make_gloo_communicator(store, "tensor", rank, ranks, std::chrono::milliseconds(20000));
      const VocabShard shard{rank * size, size, kVocab};
      auto be = make_cpu_backend(1);
      Tensor logits = shard_of(full, shard.start, size);
      VocabParallelCEContext ctx = vocab_parallel_ce_allocate(*be, kRows);
      losses[rank] =
          vocab_parallel_cross_entropy_forward(*be, ctx, logits, tgt, shard, group.get());
      vocab_parallel_cross_entropy_backward(*be, logits, ctx, logits, tgt, shard, 0.5);  // aliased
      grads[rank] = logits;
    });
    for (int rank = 0; rank < tp; ++rank) {
      CHECK(losses[rank] == Approx(ref_loss).epsilon(1e-12));
      const Tensor want = shard_of(ref_grad, rank * size, size);
      for (int64_t i = 0; i < want.numel(); ++i)
        CHECK(grads[rank].data_as<double>()[i] == Approx(want.data_as<double>()[i]).margin(1e-12));
    }
  }
}

TEST_CASE("vocab-parallel cross entropy local steps - a shard of only padding adds nothing") {
  auto be = make_cpu_backend(1);
  const Tensor tgt = targets();
  // Columns [21, 24) hold only padding: the max is -inf, the sums 0, the gradient 0.
  Tensor logits = Tensor::cpu({kRows, 3}, DType::kF64);
  be->fill(logits, 1e3);
  Tensor mx = Tensor::cpu({kRows}, DType::kF64), stats = Tensor::cpu({2, kRows}, DType::kF64);
  be->cross_entropy_shard_max(mx, logits, 21, kVocab);
  for (int64_t r = 0; r < kRows; ++r) CHECK(std::isinf(mx.data_as<double>()[r]));
  for (int64_t r = 0; r < kRows; ++r) mx.data_as<double>()[r] = 0.0;  // as after the all-reduce
  be->cross_entropy_shard_stats(stats, logits, tgt, mx, 21, kVocab);
  for (int64_t i = 0; i < 2 * kRows; ++i) CHECK(stats.data_as<double>()[i] == 0.0);
  Tensor sum = Tensor::cpu({kRows}, DType::kF64);
  be->fill(sum, 1.0);
  be->cross_entropy_shard_backward(logits, logits, tgt, mx, sum, 21, kVocab, 1.0);
  for (int64_t i = 0; i < logits.numel(); ++i) CHECK(logits.data_as<double>()[i] == 0.0);
}

TEST_CASE("vocab-parallel embedding - each rank adds only the rows it holds") {
  // wte [8, 2] split over 2 shards of 4 rows; tokens 1 and 6; no group: rank 1's part alone.
  Tensor wte = Tensor::cpu({4, 2}, DType::kF64), wpe = Tensor::cpu({2, 2}, DType::kF64);
  for (int i = 0; i < 8; ++i) wte.data_as<double>()[i] = 10 + i;
  for (int i = 0; i < 4; ++i) wpe.data_as<double>()[i] = 0.5 * i;
  Tensor tokens = Tensor::cpu({1, 2}, DType::kI32);
  tokens.data_as<int32_t>()[0] = 1;
  tokens.data_as<int32_t>()[1] = 6;
  auto be = make_cpu_backend(1);
  Tensor out = Tensor::cpu({1, 2, 2}, DType::kF64);
  vocab_parallel_embedding_forward(*be, out, tokens, wte, wpe, VocabShard{4, 4, 8}, false, nullptr);
  const double* o = out.data_as<double>();
  CHECK(o[0] == 0.0);
  CHECK(o[1] == 0.0);
  CHECK(o[2] == 14.0);  // token 6 = local row 2
  CHECK(o[3] == 15.0);
  Tensor dwte = Tensor::cpu({4, 2}, DType::kF64), dwpe = Tensor::cpu({2, 2}, DType::kF64);
  Tensor dout = Tensor::cpu({1, 2, 2}, DType::kF64);
  for (int i = 0; i < 4; ++i) dout.data_as<double>()[i] = 1 + i;
  vocab_parallel_embedding_backward(*be, dwte, dwpe, dout, tokens, VocabShard{4, 4, 8});
  CHECK(dwte.data_as<double>()[4] == 3.0);
  CHECK(dwte.data_as<double>()[5] == 4.0);
  CHECK(dwte.data_as<double>()[0] == 0.0);
  CHECK(dwpe.data_as<double>()[3] == 4.0);
}

TEST_CASE("vocab-parallel embedding - the shards' parts add up to the whole table, bit for bit") {
  // Embedding rows split over 3 shards (the last with padding rows), in f32 and bf16: the sum of
  // the parts equals embedding_forward, and the gradients' shards equal embedding_backward's.
  const DType dt = GENERATE(DType::kF32, DType::kBF16);
  auto be = make_cpu_backend(2);
  const int64_t rows = 12, c = 70, b = 3, s = 11, shard_rows = 4;
  const Tensor wte = test::random_tensor({rows, c}, dt, 1);
  const Tensor wpe = test::random_tensor({s, c}, dt, 2);
  const Tensor dout = test::random_tensor({b, s, c}, dt, 3);
  Tensor tokens = Tensor::cpu({b, s}, DType::kI32);
  for (int64_t i = 0; i < b * s; ++i)
    tokens.data_as<int32_t>()[i] = static_cast<int32_t>(i * 7 % 10);
  Tensor want = Tensor::cpu({b, s, c}, dt);
  be->embedding_forward(want, tokens, wte, wpe);
  Tensor dwte = Tensor::cpu({rows, c}, acc_dtype(dt)), dwpe = Tensor::cpu({s, c}, acc_dtype(dt));
  be->embedding_backward(dwte, dwpe, dout, tokens);

  Tensor sum = Tensor::cpu({b, s, c}, DType::kF32);
  for (int64_t start = 0; start < rows; start += shard_rows) {
    Tensor part = Tensor::cpu({b, s, c}, dt), part_f32 = Tensor::cpu({b, s, c}, DType::kF32);
    const Tensor local = wte.slice(start, start + shard_rows);
    be->embedding_shard_forward(part, tokens, local, start == 0 ? wpe : Tensor(), start);
    be->copy(part_f32, part);
    be->add(sum, sum, part_f32);
    Tensor dlocal = Tensor::cpu({shard_rows, c}, acc_dtype(dt));
    Tensor dpos = Tensor::cpu({s, c}, acc_dtype(dt)), none;
    be->embedding_shard_backward(dlocal, start == 0 ? dpos : none, dout, tokens, start);
    CHECK(test::bitwise_equal(dlocal, dwte.slice(start, start + shard_rows)));
    if (start == 0) CHECK(test::bitwise_equal(dpos, dwpe));
  }
  Tensor got = Tensor::cpu({b, s, c}, dt);
  be->copy(got, sum);  // one shard's value plus exact zeros, rounded once: exact
  CHECK(test::bitwise_equal(got, want));
}

TEST_CASE(
    "vocab-parallel token scores equal the full row's log-softmax and argmax over 1, 2 and 4 "
    "ranks") {
  // Rows in f32 with ties for the max across the shards: the greedy token is the lowest index
  // among them, as one device's argmax; padding columns (huge) never count.
  constexpr int64_t rows = 4, padded = 24, vocab = 21;
  std::vector<float> full(static_cast<size_t>(rows * padded));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < padded; ++c)
      full[static_cast<size_t>(r * padded + c)] =
          c < vocab ? static_cast<float>(logit(r, c)) : 1e3f;
  full[1 * padded + 3] = full[1 * padded + 15] = 9.0f;  // row 1: a tie between shards
  full[2 * padded + 20] = full[2 * padded + 7] = 8.5f;  // row 2: the higher index first seen
  const std::vector<int32_t> tgt = {0, 3, 20, 12};
  std::vector<double> want(rows);
  std::vector<int64_t> arg(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = full.data() + r * padded;
    arg[static_cast<size_t>(r)] = std::max_element(x, x + vocab) - x;
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(x[v]) - x[arg[r]]);
    want[static_cast<size_t>(r)] =
        double(x[tgt[static_cast<size_t>(r)]]) - x[arg[r]] - std::log(sum);
  }
  REQUIRE(arg[1] == 3);
  REQUIRE(arg[2] == 7);
  const std::vector<int64_t> order = {2, 0, 3, 1};  // the rows scored, in this order
  for (int tp : {1, 2, 4}) {
    INFO("tp " << tp);
    const int64_t size = padded / tp;
    MemoryStore store;
    std::vector<TokenScores> got(static_cast<size_t>(tp));
    run_ranks(tp, [&](int rank) {
      std::vector<int64_t> ranks(tp);
      for (int i = 0; i < tp; ++i) ranks[i] = i;
      auto group =
          make_gloo_communicator(store, "tensor", rank, ranks, std::chrono::milliseconds(20000));
      Tensor local = Tensor::cpu({rows, size}, DType::kF32);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < size; ++j)
          local.data_as<float>()[r * size + j] =
              full[static_cast<size_t>(r * padded + rank * size + j)];
      Tensor targets = Tensor::cpu({rows}, DType::kI32);
      std::copy(tgt.begin(), tgt.end(), targets.data_as<int32_t>());
      auto be = make_cpu_backend(1);
      VocabParallelCEContext ctx = vocab_parallel_ce_allocate(*be, rows);
      got[static_cast<size_t>(rank)] = vocab_parallel_token_scores(
          *be, ctx, local, targets, order, VocabShard{rank * size, size, vocab},
          tp > 1 ? group.get() : nullptr);
    });
    for (int rank = 0; rank < tp; ++rank)
      for (size_t k = 0; k < order.size(); ++k) {
        const auto u = static_cast<size_t>(order[k]);
        CHECK(got[static_cast<size_t>(rank)].logprob[k] == Approx(want[u]).epsilon(1e-12));
        CHECK((got[static_cast<size_t>(rank)].greedy[k] != 0) == (arg[u] == tgt[u]));
      }
  }
}

}  // namespace
}  // namespace mtnlg
