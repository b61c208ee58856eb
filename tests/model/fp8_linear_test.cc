// precision: fp8's pieces on the CPU: Backend::fp8_cast and abs_max against fp8_round element by
// element; a linear layer's three FP8 GEMMs (model/fp8_linear.h) against their definition in
// float64 from the same cast operands and scales; delayed scales from a step's amaxes, over a
// second step; current scaling from each tensor itself; tensor-parallel shards cast with the whole
// tensor's scales; the scaling state saved and loaded.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "model/fp8_linear.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"

namespace mtnlg {
namespace {

std::vector<float> randn(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(Bf16(d(rng)));  // bf16 values
  return v;
}

void put(Tensor& t, const std::vector<float>& v) {
  if (t.dtype() == DType::kBF16) {
    for (size_t i = 0; i < v.size(); ++i) t.data_as<Bf16>()[i] = Bf16(v[i]);
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.data_as<float>()[i] = v[i];
  }
}

double at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kBF16 ? static_cast<float>(t.data_as<Bf16>()[i])
                                   : static_cast<double>(t.data_as<float>()[i]);
}

double amax_of(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

TEST_CASE("fp8_cast is fp8_round of each scaled element and abs_max the largest magnitude") {
  auto be = make_cpu_backend(2);
  const int64_t n = 20000;  // past one block: the threads split it
  std::vector<float> v = randn(n, 3.0f, 7);
  v[5] = 1000.0f;  // saturates in E4M3 at this scale
  v[17] = -1e-9f;  // underflows to -0
  for (const DType in_dtype : {DType::kF32, DType::kBF16})
    for (const DType out_dtype : {DType::kF32, DType::kBF16})
      for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
        Tensor in = be->alloc({n}, in_dtype), out = be->alloc({n}, out_dtype);
        put(in, v);
        const float scale = 3.7f;
        const double amax = be->fp8_cast(out, in, scale, f);
        CHECK(amax == static_cast<double>(static_cast<float>(Bf16(1000.0f))));
        CHECK(be->abs_max(in) == amax);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i)
          wrong += at(out, i) != fp8_round(static_cast<float>(at(in, i)) * scale, f);
        CHECK(wrong == 0);
      }
  // NaN is kept by the cast and reported by the maximum.
  Tensor t = be->alloc({3}, DType::kF32);
  put(t, {1.0f, NAN, -2.0f});
  CHECK(std::isnan(be->abs_max(t)));
  Tensor q = be->alloc({3}, DType::kBF16);
  CHECK(std::isnan(be->fp8_cast(q, t, 1.0, Fp8Format::kE4M3)));
  CHECK(std::isnan(at(q, 1)));
  CHECK(at(q, 2) == -2.0);
  Tensor empty = be->alloc({0}, DType::kF32);
  CHECK(be->abs_max(empty) == 0.0);
  CHECK_THROWS(be->fp8_cast(q, t, 0.0, Fp8Format::kE4M3));  // the scale must be > 0
}

// Delayed scaling's casts (model/fp8_linear.cc) leave their amax in a word on the device:
// fp8_cast's values, the word the largest magnitude's bits over the casts, NaN sticking.
TEST_CASE("fp8_cast_accumulate casts as fp8_cast and keeps the largest amax in its word") {
  auto be = make_cpu_backend(2);
  Tensor words = be->alloc({3}, DType::kI32);
  be->fill(words, 0.0);
  Tensor word = words.slice(1, 2);
  const auto word_amax = [&] {
    return fp8_amax_from_bits(static_cast<uint32_t>(words.data_as<int32_t>()[1]));
  };
  const std::vector<float> first = {0.5f, -3.0f, 2.0f}, smaller = {1.0f, -1.5f, 0.25f},
                           larger = {7.0f, 0.0f, -6.5f};
  for (const auto& [v, want] :
       {std::pair{first, 3.0f}, std::pair{smaller, 3.0f}, std::pair{larger, 7.0f}}) {
    Tensor in = be->alloc({3}, DType::kF32), q = be->alloc({3}, DType::kBF16),
           ref = be->alloc({3}, DType::kBF16);
    put(in, v);
    be->fp8_cast_accumulate(q, in, 40.0, Fp8Format::kE4M3, word);
    be->fp8_cast(ref, in, 40.0, Fp8Format::kE4M3);
    for (int64_t i = 0; i < 3; ++i) CHECK(at(q, i) == at(ref, i));
    CHECK(word_amax() == want);
  }
  CHECK(words.data_as<int32_t>()[0] == 0);  // the neighbours untouched
  CHECK(words.data_as<int32_t>()[2] == 0);
  Tensor nan_in = be->alloc({2}, DType::kF32), q = be->alloc({2}, DType::kBF16);
  put(nan_in, {1.0f, NAN});
  be->fp8_cast_accumulate(q, nan_in, 1.0, Fp8Format::kE4M3, word);
  CHECK(std::isnan(word_amax()));
  put(nan_in, {1e6f, 2.0f});  // NaN sticks: no finite value's bits reach it
  be->fp8_cast_accumulate(q, nan_in, 1.0, Fp8Format::kE4M3, word);
  CHECK(std::isnan(word_amax()));
  Tensor f32_word = be->alloc({1}, DType::kF32);
  CHECK_THROWS_WITH(be->fp8_cast_accumulate(q, nan_in, 1.0, Fp8Format::kE4M3, f32_word),
                    Catch::Contains("amax_bits"));
}

// A linear layer [out, in] on rows, as model/fp8_linear.h runs it, against float64.
struct Layer {
  int64_t rows = 16, in = 64, out = 256;
  std::vector<float> x, w, b, dy;
  ParamRegistry reg;
  Param* wp = nullptr;
  Param* bp = nullptr;

  explicit Layer(Backend& be, uint32_t seed) {
    x = randn(rows * in, 1.5f, seed);
    w = randn(out * in, 0.05f, seed + 1);
    b = randn(out, 0.1f, seed + 2);
    dy = randn(rows * out, 1e-3f, seed + 3);
    reg.add({.name = "w", .global_shape = {out, in}, .local_shape = {out, in}});
    reg.add({.name = "b", .global_shape = {out}, .local_shape = {out}});
    reg.allocate(be, DType::kBF16, DType::kF32);
    wp = &reg.get("w");
    bp = &reg.get("b");
    put(wp->value, w);
    put(bp->value, b);
    be.fill(wp->grad, 0.0);
    be.fill(bp->grad, 0.0);
  }
};

GPTConfig config_for(const Layer& l) {
  GPTConfig c;
  c.hidden = l.in;
  c.heads = 4;
  c.ffn = l.out;
  c.seq = l.rows;
  return c;
}

// q(v s) as float64 values.
std::vector<double> cast(const std::vector<float>& v, double scale, Fp8Format f) {
  std::vector<double> q(v.size());
  for (size_t i = 0; i < v.size(); ++i) q[i] = fp8_round(v[i] * static_cast<float>(scale), f);
  return q;
}

void check_step(Backend& be, Layer& l, Fp8Linears& f, double sx, double sw, double sg,
                Fp8Format grad_format) {
  Fp8LinearScaling& s = f.at(0, Fp8Linears::kFc1);
  Tensor x = be.alloc({l.rows, l.in}, DType::kBF16), y = be.alloc({l.rows, l.out}, DType::kBF16);
  Tensor dy = be.alloc({l.rows, l.out}, DType::kBF16), dx = be.alloc({l.rows, l.in}, DType::kBF16);
  put(x, l.x);
  put(dy, l.dy);
  be.fill(l.wp->grad, 0.0);
  fp8_linear_forward(be, f, s, y, x, *l.wp, *l.bp);
  fp8_linear_backward(be, f, s, dx, dy, x, *l.wp, l.bp);
  const std::vector<double> qx = cast(l.x, sx, Fp8Format::kE4M3),
                            qw = cast(l.w, sw, Fp8Format::kE4M3), qg = cast(l.dy, sg, grad_format);
  // y = q(x) q(W)^T / (s_x s_w) + b: the product rounded to bf16 (the GEMM's output), then the
  // sum with the bias: within a bf16 unit of each.
  int64_t bad = 0;
  for (int64_t r = 0; r < l.rows; ++r)
    for (int64_t o = 0; o < l.out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < l.in; ++i) acc += qx[r * l.in + i] * qw[o * l.in + i];
      const double want = acc / (sx * sw) + l.b[o];
      const double product = acc / (sx * sw);
      bad += std::fabs(at(y, r * l.out + o) - want) >
             (std::fabs(product) + std::fabs(want)) / 256 + 1e-6;
    }
  CHECK(bad == 0);
  // dx = q(dy) q(W) / (s_g s_w), rounded to bf16.
  bad = 0;
  for (int64_t r = 0; r < l.rows; ++r)
    for (int64_t i = 0; i < l.in; ++i) {
      double acc = 0;
      for (int64_t o = 0; o < l.out; ++o) acc += qg[r * l.out + o] * qw[o * l.in + i];
      const double want = acc / (sg * sw);
      bad += std::fabs(at(dx, r * l.in + i) - want) > 1.0 / 256 * std::fabs(want) + 1e-12;
    }
  CHECK(bad == 0);
  // dW = q(dy)^T q(x) / (s_g s_x) in fp32: products exact, fp32 sums of 16 terms.
  bad = 0;
  for (int64_t o = 0; o < l.out; ++o)
    for (int64_t i = 0; i < l.in; ++i) {
      double acc = 0, mag = 0;
      for (int64_t r = 0; r < l.rows; ++r) {
        acc += qg[r * l.out + o] * qx[r * l.in + i];
        mag += std::fabs(qg[r * l.out + o] * qx[r * l.in + i]);
      }
      const double want = acc / (sg * sx);
      bad += std::fabs(at(l.wp->grad, o * l.in + i) - want) > 1e-6 * mag / (sg * sx) + 1e-30;
    }
  CHECK(bad == 0);
}

TEST_CASE(
    "a linear layer's FP8 GEMMs equal their definition and delayed scales follow the amaxes") {
  auto be = make_cpu_backend(2);
  for (const bool hybrid : {true, false}) {
    Layer l(*be, hybrid ? 11 : 21);
    Fp8Options o;
    o.hybrid = hybrid;
    o.amax_history_len = 4;
    Fp8Linears f(o, {0});
    f.reserve(*be, config_for(l), 1);
    const Fp8Format g = hybrid ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
    // Step 1 casts with scale 1 (Transformer Engine's start); its amaxes set step 2's scales.
    check_step(*be, l, f, 1.0, 1.0, 1.0, g);
    f.end_step({});
    const Fp8LinearScaling& s = f.at(0, Fp8Linears::kFc1);
    const double sx = 448.0f / static_cast<float>(amax_of(l.x)),
                 sw = 448.0f / static_cast<float>(amax_of(l.w)),
                 sg = fp8_max(g) / static_cast<float>(amax_of(l.dy));
    CHECK(s.input.scale() == static_cast<float>(sx));
    CHECK(s.weight.scale() == static_cast<float>(sw));
    CHECK(s.grad.scale() == static_cast<float>(sg));
    check_step(*be, l, f, s.input.scale(), s.weight.scale(), s.grad.scale(), g);
    // Evaluation's casts record nothing: a larger input leaves the next scale alone.
    f.set_recording(false);
    Tensor x = be->alloc({l.rows, l.in}, DType::kBF16),
           y = be->alloc({l.rows, l.out}, DType::kBF16);
    std::vector<float> big = l.x;
    big[0] = 1000.0f;
    put(x, big);
    fp8_linear_forward(*be, f, f.at(0, Fp8Linears::kFc1), y, x, *l.wp, *l.bp);
    f.set_recording(true);
    f.end_step({});
    CHECK(s.input.scale() == static_cast<float>(sx));
  }
}

// Bits of a tensor's elements, to compare runs exactly.
std::vector<uint16_t> bits_of(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.data());
  return std::vector<uint16_t>(p, p + t.nbytes() / 2);
}

TEST_CASE("a weight is cast once in a frozen-weights window - the same bits as a cast per use") {
  auto be = make_cpu_backend(2);
  for (const Fp8ScalingMode mode : {Fp8ScalingMode::kDelayed, Fp8ScalingMode::kCurrent}) {
    Layer l(*be, mode == Fp8ScalingMode::kDelayed ? 41 : 51);
    Fp8Options cached, fresh;
    cached.scaling = fresh.scaling = mode;
    fresh.cache_weights = false;
    Fp8Linears fc(cached, {0}), ff(fresh, {0});
    fc.reserve(*be, config_for(l), 1);
    ff.reserve(*be, config_for(l), 1);
    Tensor x = be->alloc({l.rows, l.in}, DType::kBF16),
           y = be->alloc({l.rows, l.out}, DType::kBF16);
    Tensor dy = be->alloc({l.rows, l.out}, DType::kBF16),
           dx = be->alloc({l.rows, l.in}, DType::kBF16);
    // Three iterations of three micro-batches (different inputs each), the weights changed
    // between iterations: a cast kept past its window would multiply last iteration's weights.
    const int64_t micro = 3;
    for (int it = 0; it < 3; ++it) {
      std::vector<std::vector<uint16_t>> outs[2];
      for (int which = 0; which < 2; ++which) {
        Fp8Linears& f = which == 0 ? fc : ff;
        be->fill(l.wp->grad, 0.0);
        const FrozenWeights frozen(*be);
        for (int64_t m = 0; m < micro; ++m) {
          put(x, randn(l.rows * l.in, 1.5f, static_cast<uint32_t>(100 * it + m)));
          put(dy, randn(l.rows * l.out, 1e-3f, static_cast<uint32_t>(100 * it + m + 50)));
          fp8_linear_forward(*be, f, f.at(0, Fp8Linears::kFc1), y, x, *l.wp, *l.bp);
          fp8_linear_backward(*be, f, f.at(0, Fp8Linears::kFc1), dx, dy, x, *l.wp, l.bp);
          outs[which].push_back(bits_of(y));
          outs[which].push_back(bits_of(dx));
        }
        outs[which].push_back(bits_of(l.wp->grad));
        if (which == 0 && it == 0) {
          // Writing a held weight inside the window is refused, not trained on stale casts.
          Tensor other = be->alloc(l.wp->value.shape(), DType::kBF16);
          CHECK_THROWS_WITH(be->copy(l.wp->value, other), Catch::Contains("frozen-weights window"));
        }
      }
      CHECK(outs[0] == outs[1]);
      // One cast a window, every other use reused; the uncached one keeps nothing.
      CHECK(fc.weight_cast_counts().made == it + 1);
      CHECK(fc.weight_cast_counts().reused == (it + 1) * (2 * micro - 1));
      CHECK(ff.weight_cast_counts().made == 0);
      fc.end_step({});
      ff.end_step({});
      put(l.wp->value, randn(l.out * l.in, 0.05f, static_cast<uint32_t>(7 + it)));
    }
    // Outside a window every use casts afresh; a weight's scaling is the one cast_weight takes.
    const Fp8Linears::WeightCastCounts before = fc.weight_cast_counts();
    fp8_linear_forward(*be, fc, fc.at(0, Fp8Linears::kFc1), y, x, *l.wp, *l.bp);
    CHECK(fc.weight_cast_counts().made == before.made);
    CHECK(fc.weight_cast_counts().reused == before.reused);
    const FrozenWeights frozen(*be);
    CHECK_THROWS_WITH(fc.cast_weight(*be, l.wp->value, fc.at(0, Fp8Linears::kFc1).input),
                      Catch::Contains("cast_weight with an input"));
  }
}

TEST_CASE("current scaling casts each tensor with the scale of its own amax") {
  auto be = make_cpu_backend(1);
  Layer l(*be, 31);
  Fp8Options o;
  o.scaling = Fp8ScalingMode::kCurrent;
  Fp8Linears f(o, {0});
  f.reserve(*be, config_for(l), 1);
  const auto scale = [](const std::vector<float>& v, Fp8Format fmt) {
    return static_cast<double>(fp8_max(fmt) / static_cast<float>(amax_of(v)));
  };
  // The scale_inv the GEMM takes is 1/scale in float; the reference divides by the scale, which
  // differs from it by a float rounding: inside the bands above.
  check_step(*be, l, f, scale(l.x, Fp8Format::kE4M3), scale(l.w, Fp8Format::kE4M3),
             scale(l.dy, Fp8Format::kE5M2), Fp8Format::kE5M2);
}

// A [rows, cols] tensor split by columns over tp ranks (a column-parallel weight's shard or a
// row-parallel input's): each rank's cast must be the one-process cast of the whole tensor,
// sliced, in both scalings; without the tensor group the ranks' scales differ (the check bites).
TEST_CASE("tensor-parallel shards cast with the whole tensor's scale in both scalings") {
  const int64_t rows = 8, cols = 24;
  std::vector<float> full = randn(rows * cols, 1.0f, 51);
  full[5 * cols + 19] = 9.0f;  // the amax, in the last rank's columns
  const auto shard = [&](int rank, int tp) {
    const int64_t w = cols / tp;
    std::vector<float> v;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = rank * w; c < (rank + 1) * w; ++c) v.push_back(full[r * cols + c]);
    return v;
  };
  GPTConfig c;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.seq = 16;
  struct Got {
    std::vector<double> q;  // the second cast
    double scale_inv = 0;
  };
  // Casts the shard twice (delayed: a step's end between them, over `use_group` or nothing).
  const auto run = [&](Fp8ScalingMode mode, int rank, int tp, Communicator* group, bool use_group) {
    auto be = make_cpu_backend(1);
    Fp8Options o;
    o.scaling = mode;
    Fp8Linears f(o, {0}, use_group ? group : nullptr);
    f.reserve(*be, c, 1);
    const std::vector<float> v = shard(rank, tp);
    Tensor t = be->alloc({rows, static_cast<int64_t>(v.size()) / rows}, DType::kBF16);
    put(t, v);
    Fp8TensorScaling& s = f.at(0, Fp8Linears::kQkv).weight;
    f.cast(*be, 1, t, s);
    if (use_group)
      f.end_step({group});
    else
      f.end_step({});
    const Fp8Linears::Cast q = f.cast(*be, 1, t, s);
    Got g;
    g.scale_inv = q.scale_inv;
    for (int64_t i = 0; i < q.q.numel(); ++i) g.q.push_back(at(q.q, i));
    return g;
  };
  for (const Fp8ScalingMode mode : {Fp8ScalingMode::kDelayed, Fp8ScalingMode::kCurrent}) {
    const Got ref = run(mode, 0, 1, nullptr, false);
    for (const int tp : {2, 3}) {
      for (const bool use_group : {true, false}) {
        INFO("scaling " << (mode == Fp8ScalingMode::kDelayed ? "delayed" : "current") << " tp "
                        << tp << (use_group ? "" : " without the group"));
        MemoryStore store;
        std::vector<Got> got(static_cast<size_t>(tp));
        test::run_ranks(tp, [&](int rank) {
          std::vector<int64_t> ranks(static_cast<size_t>(tp));
          for (int i = 0; i < tp; ++i) ranks[static_cast<size_t>(i)] = i;
          auto group = make_gloo_communicator(store, "tensor", rank, ranks,
                                              std::chrono::milliseconds(20000));
          got[static_cast<size_t>(rank)] = run(mode, rank, tp, group.get(), use_group);
        });
        int same_scale = 0, same_values = 0;
        for (int rank = 0; rank < tp; ++rank) {
          const Got& g = got[static_cast<size_t>(rank)];
          same_scale += g.scale_inv == ref.scale_inv;
          const int64_t w = cols / tp;
          bool equal = true;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < w; ++j)
              equal = equal && g.q[static_cast<size_t>(r * w + j)] ==
                                   ref.q[static_cast<size_t>(r * cols + rank * w + j)];
          same_values += equal;
        }
        if (use_group) {
          CHECK(same_scale == tp);
          CHECK(same_values == tp);
        } else {
          CHECK(same_scale == 1);  // the rank holding the amax only
        }
      }
    }
  }
}

TEST_CASE("FP8 scaling state saved and loaded and a missing tensor named") {
  auto be = make_cpu_backend(1);
  Layer l(*be, 41);
  Fp8Options o;
  o.amax_history_len = 8;
  Fp8Linears f(o, {3});
  GPTConfig c = config_for(l);
  f.reserve(*be, c, 1);
  Tensor x = be->alloc({l.rows, l.in}, DType::kBF16), y = be->alloc({l.rows, l.out}, DType::kBF16);
  put(x, l.x);
  for (int step = 0; step < 3; ++step) {
    fp8_linear_forward(*be, f, f.at(3, Fp8Linears::kFc1), y, x, *l.wp, *l.bp);
    f.end_step({});
  }
  const auto saved = f.save();
  REQUIRE(saved.size() == 12);  // 4 linear layers x (input, weight, grad)
  CHECK(saved[6].first == "layers.3.mlp.dense_h_to_4h.input");
  Fp8Linears g(o, {3});
  g.load(saved);
  CHECK(g.save() == saved);
  CHECK(g.at(3, Fp8Linears::kFc1).input.scale() == f.at(3, Fp8Linears::kFc1).input.scale());
  auto missing = saved;
  missing.erase(missing.begin() + 6);
  try {
    g.load(missing);
    FAIL("loaded without layers.3.mlp.dense_h_to_4h.input");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("layers.3.mlp.dense_h_to_4h.input") != std::string::npos);
  }
  Fp8Linears other_layer(o, {4});
  CHECK_THROWS(other_layer.load(saved));
}

}  // namespace
}  // namespace mtnlg
