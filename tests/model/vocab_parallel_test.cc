// The vocab-parallel cross entropy (model/vocab_parallel.h) against the backend's cross entropy
// over full rows: the local steps combined by hand (no group), and tp = 2 and 4 ranks as threads
// over a MemoryStore with Gloo communicators, padding columns included.
#include "model/vocab_parallel.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <exception>
#include <functional>
#include <thread>

#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"

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
      Tensor logits = shard_of(full, shard.start, size);
      VocabParallelCEContext ctx;
      losses[rank] = vocab_parallel_cross_entropy_forward(ctx, logits, tgt, shard, group.get());
      vocab_parallel_cross_entropy_backward(logits, ctx, logits, tgt, shard, 0.5);  // aliased
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
  const Tensor full = full_logits(), tgt = targets();
  // Shard [21, 24) holds only padding columns: its max is -inf, its sums 0.
  const VocabShard shard{21, 3, kVocab};
  Tensor logits = Tensor::cpu({kRows, 3}, DType::kF64);
  Tensor mx = Tensor::cpu({kRows}, DType::kF64), stats = Tensor::cpu({2 * kRows}, DType::kF64);
  vocab_parallel_ce_local_max(mx, logits, shard);
  for (int64_t r = 0; r < kRows; ++r) mx.data_as<double>()[r] = 0.0;  // as after the all-reduce
  vocab_parallel_ce_local_stats(stats, logits, tgt, mx, shard);
  for (int64_t i = 0; i < 2 * kRows; ++i) CHECK(stats.data_as<double>()[i] == 0.0);
}

TEST_CASE("vocab-parallel embedding - each rank adds only the rows it holds") {
  // wte [8, 2] split over 2 shards of 4 rows; tokens 1 and 6; no group: rank 1's part alone.
  Tensor wte = Tensor::cpu({4, 2}, DType::kF64), wpe = Tensor::cpu({2, 2}, DType::kF64);
  for (int i = 0; i < 8; ++i) wte.data_as<double>()[i] = 10 + i;
  for (int i = 0; i < 4; ++i) wpe.data_as<double>()[i] = 0.5 * i;
  Tensor tokens = Tensor::cpu({1, 2}, DType::kI32);
  tokens.data_as<int32_t>()[0] = 1;
  tokens.data_as<int32_t>()[1] = 6;
  Tensor out = Tensor::cpu({1, 2, 2}, DType::kF64);
  vocab_parallel_embedding_forward(out, tokens, wte, wpe, VocabShard{4, 4, 8}, false, nullptr);
  const double* o = out.data_as<double>();
  CHECK(o[0] == 0.0);
  CHECK(o[1] == 0.0);
  CHECK(o[2] == 14.0);  // token 6 = local row 2
  CHECK(o[3] == 15.0);
  Tensor dwte = Tensor::cpu({4, 2}, DType::kF64), dwpe = Tensor::cpu({2, 2}, DType::kF64);
  Tensor dout = Tensor::cpu({1, 2, 2}, DType::kF64);
  for (int i = 0; i < 4; ++i) dout.data_as<double>()[i] = 1 + i;
  vocab_parallel_embedding_backward(dwte, dwpe, dout, tokens, VocabShard{4, 4, 8});
  CHECK(dwte.data_as<double>()[4] == 3.0);
  CHECK(dwte.data_as<double>()[5] == 4.0);
  CHECK(dwte.data_as<double>()[0] == 0.0);
  CHECK(dwpe.data_as<double>()[3] == 4.0);
}

}  // namespace
}  // namespace mtnlg
