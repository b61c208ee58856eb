// mtnlg-eval's sizing (cmd/eval.h evaluate): a --micro-batch whose activations do not fit is an
// error naming --micro-batch and the fix, raised from one sample's measured activations before
// anything of the micro-batch is allocated (not std::bad_alloc or the OOM killer); a huge
// --micro-batch over a small split is that split in one forward.
#include "cmd/eval.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "core/host_memory.h"
#include "core/status.h"
#include "data/sample_source.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// `n` samples of the same tokens, none stored: a split as large as asked for.
class ManySamples : public SampleSource {
 public:
  ManySamples(int64_t n, int64_t seq) : n_(n), seq_(seq) {}
  int64_t size() const override { return n_; }
  int64_t seq_length() const override { return seq_; }
  void sample(int64_t, int32_t* out) const override {
    for (int64_t j = 0; j <= seq_; ++j) out[j] = static_cast<int32_t>(j % 7);
  }
  void check_vocab(int64_t) const override {}
  std::string description() const override { return "{}"; }

 private:
  int64_t n_, seq_;
};

TEST_CASE("a --micro-batch whose activations do not fit is refused naming it - before allocating") {
  const GPTConfig c = test::tiny_gpt(2);
  auto backend = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 3);
  const HostMemory host = host_memory_available();
  if (host.available <= 0)
    test::skip_test("no memory figure on this machine (" + host.source + ")");
  // More samples than this machine's memory holds activations for (one sample of the tiny model
  // takes some KiB), in one forward.
  const int64_t n = host.available / 64;
  const ManySamples split(n, c.seq);
  const int64_t live_before = backend->live_bytes();
  try {
    evaluate(model, split, n, n);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "--micro-batch");
    CHECK(std::string(e.message()).find("MiB available; the fix: --micro-batch") !=
          std::string::npos);
  }
  CHECK(backend->live_bytes() == live_before);  // the one sample's activations freed too
  // Beyond any machine: the product would overflow.
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  const ManySamples endless(huge, c.seq);
  CHECK_THROWS_WITH(evaluate(model, endless, huge, huge),
                    Catch::Contains("needs more memory than any machine has"));
  // A huge --micro-batch over a small split is the split in one forward: the same loss.
  const ManySamples small(6, c.seq);
  const EvalResult one = evaluate(model, small, 6, 1);
  const EvalResult all = evaluate(model, small, 6, std::numeric_limits<int64_t>::max());
  CHECK(all.loss == Approx(one.loss).epsilon(1e-6));
}

}  // namespace
}  // namespace mtnlg
