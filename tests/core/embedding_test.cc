// Token + position embedding on the CPU: forward against the definition, backward against
// central differences, repeated tokens accumulate, bad token ids are rejected, 1 vs 2 threads.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {
Tensor tokens_of(std::vector<int32_t> ids, int64_t b, int64_t s) {
  Tensor t = Tensor::cpu({b, s}, DType::kI32);
  for (size_t i = 0; i < ids.size(); ++i) t.data_as<int32_t>()[i] = ids[i];
  return t;
}
}  // namespace

TEST_CASE("embedding forward adds token and position rows - backward accumulates") {
  auto be = make_cpu_backend(2);
  const int64_t b = 2, s = 3, c = 70, V = 5, P = 4;
  Tensor tok = tokens_of({1, 4, 1, 1, 0, 4}, b, s);  // repeats within and across sequences
  Tensor wte = random_tensor({V, c}, DType::kF64, 1), wpe = random_tensor({P, c}, DType::kF64, 2);
  Tensor out = be->alloc({b, s, c}, DType::kF64);
  be->embedding_forward(out, tok, wte, wpe);
  const auto y = to_vec(out), te = to_vec(wte), pe = to_vec(wpe);
  for (int64_t r = 0; r < b * s; ++r)
    for (int64_t j = 0; j < c; ++j)
      REQUIRE(y[r * c + j] == te[tok.data_as<int32_t>()[r] * c + j] + pe[(r % s) * c + j]);

  Tensor wt = random_tensor({b, s, c}, DType::kF64, 3);
  Tensor dwte = random_tensor({V, c}, DType::kF64, 4), dwpe = random_tensor({P, c}, DType::kF64, 5);
  const Tensor dwte0 = clone(dwte), dwpe0 = clone(dwpe);
  be->embedding_backward(dwte, dwpe, wt, tok);
  be->axpy(dwte, dwte0, -1.0);  // what backward added
  be->axpy(dwpe, dwpe0, -1.0);
  auto fwd = [&] {
    Tensor o = be->alloc({b, s, c}, DType::kF64);
    be->embedding_forward(o, tok, wte, wpe);
    return o;
  };
  check_gradient(fwd, wt, wte, dwte, "dwte");
  check_gradient(fwd, wt, wpe, dwpe, "dwpe");
  // Token 1 appears three times: its row is the sum of three dout rows.
  const auto w = to_vec(wt), g = to_vec(dwte);
  CHECK(g[1 * c + 7] == Approx(w[0 * c + 7] + w[2 * c + 7] + w[3 * c + 7]));
  CHECK(g[2 * c + 7] == 0.0);         // unused token
  CHECK(to_vec(dwpe)[3 * c] == 0.0);  // position 3 >= s
}

TEST_CASE("embedding rejects token ids outside the table") {
  auto be = make_cpu_backend(1);
  Tensor wte = be->alloc({5, 4}, DType::kF32), wpe = be->alloc({3, 4}, DType::kF32);
  Tensor out = be->alloc({1, 3, 4}, DType::kF32);
  for (int32_t bad : {5, -1}) {
    Tensor tok = tokens_of({0, bad, 1}, 1, 3);
    try {
      be->embedding_forward(out, tok, wte, wpe);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kInvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(std::to_string(bad)));
    }
  }
  Tensor tok = tokens_of({0, 1, 2, 3}, 1, 4);  // s = 4 > wpe rows
  Tensor out4 = be->alloc({1, 4, 4}, DType::kF32);
  CHECK_THROWS_AS(be->embedding_forward(out4, tok, wte, wpe), Error);
}

TEST_CASE("embedding is bitwise identical on 1 and 2 threads") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const int64_t b = 4, s = 64, c = 200, V = 50;
  std::vector<int32_t> ids(b * s);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % V);
  Tensor tok = tokens_of(ids, b, s);
  Tensor wte = random_tensor({V, c}, DType::kF32, 6), wpe = random_tensor({s, c}, DType::kF32, 7);
  Tensor dout = random_tensor({b, s, c}, DType::kF32, 8);
  Tensor o1 = be1->alloc({b, s, c}, DType::kF32), o2 = be2->alloc({b, s, c}, DType::kF32);
  be1->embedding_forward(o1, tok, wte, wpe);
  be2->embedding_forward(o2, tok, wte, wpe);
  CHECK(bitwise_equal(o1, o2));
  Tensor a1 = be1->alloc({V, c}, DType::kF32), a2 = be2->alloc({V, c}, DType::kF32);
  Tensor p1 = be1->alloc({s, c}, DType::kF32), p2 = be2->alloc({s, c}, DType::kF32);
  be1->embedding_backward(a1, p1, dout, tok);
  be2->embedding_backward(a2, p2, dout, tok);
  CHECK(bitwise_equal(a1, a2));
  CHECK(bitwise_equal(p1, p2));
}
