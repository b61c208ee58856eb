// GradSync: bucketing and launch order against an in-process fake communicator (records every
// all_reduce, can block or fail), and the sums over real Gloo ranks as threads over one
// MemoryStore. Worker threads never touch Catch (not thread-safe): they record or throw, the
// main thread checks.
#include "parallel/grad_sync.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/cpu/cpu_backend.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using std::chrono::milliseconds;

// A group of `size` ranks whose all_reduce multiplies by `size` (every rank holding the same
// gradient), records each call, fails the `fail_at`-th call (1-based) with io_error, and holds
// every call while `gate` is closed.
class FakeComm final : public Communicator {
 public:
  explicit FakeComm(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void all_reduce(Tensor& t, ReduceOp op) override {
    std::unique_lock<std::mutex> lock(mu);
    calls.push_back(t.numel());
    data.push_back(t.data());
    threads.push_back(std::this_thread::get_id());
    cv.notify_all();
    cv.wait(lock, [&] { return gate_open; });
    if (static_cast<int64_t>(calls.size()) == fail_at)
      throw io_error("all_reduce on group 'fake' failed: peer rank 1 closed the connection");
    MTNLG_CHECK(op == ReduceOp::kSum);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] *= static_cast<float>(size_);
  }
  void reduce_scatter(Tensor&, const Tensor&, ReduceOp) override { unused(); }
  void all_gather(Tensor&, const Tensor&) override { unused(); }
  void broadcast(Tensor&, int) override { unused(); }
  void send(const Tensor&, int) override { unused(); }
  void recv(Tensor&, int) override { unused(); }
  void barrier() override { unused(); }
  void batch_send_recv(std::vector<P2POp>&) override { unused(); }
  int64_t bytes_sent() const override { return 0; }

  void open_gate() {
    std::lock_guard<std::mutex> lock(mu);
    gate_open = true;
    cv.notify_all();
  }
  std::vector<int64_t> recorded() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  // Blocks until at least n calls have started.
  void await_calls(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return calls.size() >= n; });
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> calls;     // numel of each all_reduce, in call order
  std::vector<const void*> data;  // where each reduced tensor starts
  std::vector<std::thread::id> threads;
  bool gate_open = true;
  int64_t fail_at = 0;

 private:
  [[noreturn]] static void unused() { throw std::logic_error("GradSync only all-reduces"); }
  int size_;
  std::string name_ = "fake";
};

// Gradients of distinct sizes (so the recorded numels name the buckets), element k of gradient
// g holding base + 100 g + k.
std::vector<Tensor> make_grads(const std::vector<int64_t>& sizes, float base) {
  std::vector<Tensor> grads;
  for (size_t g = 0; g < sizes.size(); ++g) {
    Tensor t = Tensor::cpu({sizes[g]}, DType::kF32);
    for (int64_t k = 0; k < sizes[g]; ++k)
      t.data_as<float>()[k] = base + 100.0f * static_cast<float>(g) + static_cast<float>(k);
    grads.push_back(t);
  }
  return grads;
}

// The same gradients as consecutive views of one flat buffer (ParamRegistry's layout).
// pad: the buffer's length rounded up to a multiple of it (ZeRO-1 pads to the data size; the
// tail belongs to no gradient).
std::vector<Tensor> make_buffer_grads(const std::vector<int64_t>& sizes, float base, Tensor& buffer,
                                      int64_t pad = 1) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  buffer = Tensor::cpu({(total + pad - 1) / pad * pad}, DType::kF32);
  std::vector<Tensor> grads;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    grads.push_back(buffer.slice(offset, offset + s));
    offset += s;
  }
  const std::vector<Tensor> values = make_grads(sizes, base);
  for (size_t g = 0; g < sizes.size(); ++g)
    std::copy_n(values[g].data_as<float>(), sizes[g], grads[g].data_as<float>());
  return grads;
}

void refill(std::vector<Tensor>& grads, float base) {
  for (size_t g = 0; g < grads.size(); ++g)
    for (int64_t k = 0; k < grads[g].numel(); ++k)
      grads[g].data_as<float>()[k] = base + 100.0f * static_cast<float>(g) + static_cast<float>(k);
}

// Every element equals factor * (base + 100 g + k).
void check_grads(const std::vector<Tensor>& grads, float base, float factor) {
  for (size_t g = 0; g < grads.size(); ++g)
    for (int64_t k = 0; k < grads[g].numel(); ++k) {
      INFO("gradient " << g << " element " << k);
      REQUIRE(grads[g].data_as<float>()[k] ==
              factor * (base + 100.0f * static_cast<float>(g) + static_cast<float>(k)));
    }
}

const std::vector<int64_t> kSizes = {10, 20, 30, 40};

TEST_CASE("buckets take gradients in reverse registration order up to the byte threshold") {
  FakeComm comm(1);
  // 200 bytes = 50 floats: {40, 30} reaches it, {20, 10} is the remainder.
  GradSync sync(make_grads(kSizes, 0), comm, GradSync::Mode::kOverlap, 200);
  REQUIRE(sync.num_buckets() == 2);
  CHECK(sync.bucket_of(3) == 0);
  CHECK(sync.bucket_of(2) == 0);
  CHECK(sync.bucket_of(1) == 1);
  CHECK(sync.bucket_of(0) == 1);
  GradSync one_each(make_grads(kSizes, 0), comm, GradSync::Mode::kAfterBackward, 1);
  CHECK(one_each.num_buckets() == 4);
  GradSync all(make_grads(kSizes, 0), comm, GradSync::Mode::kAfterBackward, 1 << 20);
  CHECK(all.num_buckets() == 1);
}

TEST_CASE("after backward - every bucket reduced in order on the calling thread") {
  CpuBackend backend(1);
  FakeComm comm(2);
  auto grads = make_grads(kSizes, 1);
  GradSync sync(grads, comm, GradSync::Mode::kAfterBackward, 200);
  sync.wait(backend);
  CHECK(comm.recorded() == std::vector<int64_t>{70, 30});
  CHECK(comm.threads.at(0) == std::this_thread::get_id());
  check_grads(grads, 1, 2);
  REQUIRE_THROWS_WITH(sync.mark_ready(backend, 0), Catch::Contains("kOverlap"));
}

TEST_CASE("grads that are consecutive views of one buffer are reduced in place - no staging") {
  CpuBackend backend(1);
  for (auto mode : {GradSync::Mode::kAfterBackward, GradSync::Mode::kOverlap}) {
    INFO("overlap " << (mode == GradSync::Mode::kOverlap));
    FakeComm comm(2);
    Tensor buffer;
    auto grads = make_buffer_grads(kSizes, 1, buffer);
    GradSync sync(grads, comm, mode, 200, buffer);
    CHECK(sync.in_place());
    sync.wait(backend);
    // Buckets {40, 30} then {20, 10}: the ranges starting at gradients 2 and 0 of the buffer.
    CHECK(comm.recorded() == std::vector<int64_t>{70, 30});
    CHECK(comm.data.at(0) == grads[2].data());
    CHECK(comm.data.at(1) == grads[0].data());
    check_grads(grads, 1, 2);
  }
  // Separate tensors, or a buffer they are not consecutive pieces of, are refused.
  FakeComm comm(2);
  Tensor buffer;
  auto grads = make_buffer_grads(kSizes, 1, buffer);
  std::swap(grads[1], grads[2]);
  CHECK_THROWS_WITH(GradSync(grads, comm, GradSync::Mode::kAfterBackward, 200, buffer),
                    Catch::Contains("gradient 1 is not the next piece of the gradient buffer"));
  CHECK_FALSE(
      GradSync(make_grads(kSizes, 1), comm, GradSync::Mode::kAfterBackward, 200).in_place());
}

TEST_CASE("overlap - buckets launch strictly in bucket order as their gradients complete") {
  CpuBackend backend(1);
  FakeComm comm(2);
  auto grads = make_grads(kSizes, 1);
  GradSync sync(grads, comm, GradSync::Mode::kOverlap, 1);  // one gradient per bucket
  REQUIRE(sync.num_buckets() == 4);
  for (int iteration = 0; iteration < 3; ++iteration) {
    INFO("iteration " << iteration);
    refill(grads, static_cast<float>(iteration));
    sync.mark_ready(backend, grads[0]);  // the last bucket: must wait for the earlier ones
    CHECK(sync.num_launched() == 0);
    sync.mark_ready(backend, 2);  // bucket 1, before bucket 0
    CHECK(sync.num_launched() == 0);
    sync.mark_ready(backend, 3);  // bucket 0 completes: buckets 0 and 1 go
    CHECK(sync.num_launched() == 2);
    REQUIRE_THROWS_WITH(sync.mark_ready(backend, 3), Catch::Contains("twice"));
    sync.mark_ready(backend, grads[1]);  // buckets 2 and 3
    CHECK(sync.num_launched() == 4);
    sync.wait(backend);
    CHECK(sync.num_launched() == 0);
    check_grads(grads, static_cast<float>(iteration), 2);
  }
  const auto calls = comm.recorded();
  REQUIRE(calls.size() == 12);
  for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i] == kSizes[3 - i % 4]);
  for (auto id : comm.threads) CHECK(id != std::this_thread::get_id());
  REQUIRE_THROWS_WITH(sync.mark_ready(backend, Tensor::cpu({40}, DType::kF32)),
                      Catch::Contains("not a gradient"));
}

TEST_CASE("overlap - the reduction runs while the caller goes on") {
  CpuBackend backend(1);
  FakeComm comm(2);
  comm.gate_open = false;
  auto grads = make_grads(kSizes, 3);
  GradSync sync(grads, comm, GradSync::Mode::kOverlap, 1);
  sync.mark_ready(backend, 3);
  comm.await_calls(1);  // bucket 0 is in flight on the communication thread, held by the gate
  sync.mark_ready(backend, 2);  // the caller is not blocked by it
  sync.mark_ready(backend, 1);
  CHECK(comm.recorded() == std::vector<int64_t>{40});
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(50));
    comm.open_gate();
  });
  sync.wait(backend);  // launches the unmarked gradient 0's bucket, waits for all
  opener.join();
  CHECK(comm.recorded() == std::vector<int64_t>{40, 30, 20, 10});
  check_grads(grads, 3, 2);
}

TEST_CASE("overlap - a failure on the communication thread is rethrown by wait") {
  CpuBackend backend(1);
  FakeComm comm(2);
  comm.fail_at = 2;
  auto grads = make_grads(kSizes, 1);
  GradSync sync(grads, comm, GradSync::Mode::kOverlap, 1);
  for (int64_t i = 3; i >= 0; --i) sync.mark_ready(backend, i);
  REQUIRE_THROWS_WITH(sync.wait(backend), Catch::Contains("peer rank 1 closed"));
  // Buckets after the failed one are not attempted; the error stays.
  CHECK(comm.recorded() == std::vector<int64_t>{40, 30});
  sync.mark_ready(backend, 3);
  REQUIRE_THROWS_AS(sync.wait(backend), Error);
  // The destructor joins the thread (the test would hang or terminate otherwise).
}

TEST_CASE("Gloo ranks - both modes sum the ranks' gradients whatever order they mark") {
  for (auto mode : {GradSync::Mode::kAfterBackward, GradSync::Mode::kOverlap}) {
    for (bool in_place : {false, true}) {
      for (int n : {2, 3}) {
        INFO("ranks " << n << " overlap " << (mode == GradSync::Mode::kOverlap) << " in place "
                      << in_place);
        MemoryStore store;
        std::vector<std::vector<Tensor>> results(static_cast<size_t>(n));
        test::run_ranks(n, [&](int r) {
          std::vector<int64_t> ids(static_cast<size_t>(n));
          for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
          auto comm = make_gloo_communicator(store, "data-grads", r, ids, milliseconds(20000));
          CpuBackend backend(1);
          // 300 gradients of 1..300 floats; 4 KiB buckets: dozens of buckets of varied sizes.
          std::vector<int64_t> sizes;
          for (int64_t g = 1; g <= 300; ++g) sizes.push_back(g);
          Tensor buffer;
          auto grads = in_place ? make_buffer_grads(sizes, static_cast<float>(r), buffer)
                                : make_grads(sizes, static_cast<float>(r));
          GradSync sync(grads, *comm, mode, 4096, buffer);
          if (sync.in_place() != in_place) throw std::logic_error("in_place() is wrong");
          for (int iteration = 0; iteration < 2; ++iteration) {
            refill(grads, static_cast<float>(r + iteration));
            if (mode == GradSync::Mode::kOverlap) {
              // Each rank marks gradients 10..299 in its own order (a stride walk, the strides
              // coprime with 290); gradients 0..9 stay unmarked for wait() to launch.
              const int64_t stride = r == 0 ? 7 : r == 1 ? 11 : 13;
              for (int64_t k = 0; k < 290; ++k)
                sync.mark_ready(backend, 10 + (k * stride + r) % 290);
            }
            sync.wait(backend);
          }
          results[static_cast<size_t>(r)] = grads;
        });
        // Sum over ranks of (r + 1 + 100 g + k), the last iteration's base being r + 1.
        float base_sum = 0;
        for (int r = 0; r < n; ++r) base_sum += static_cast<float>(r + 1);
        for (int r = 0; r < n; ++r) {
          const auto& grads = results[static_cast<size_t>(r)];
          for (size_t g = 0; g < grads.size(); ++g)
            for (int64_t k = 0; k < grads[g].numel(); ++k) {
              const float want =
                  base_sum +
                  static_cast<float>(n) * (100.0f * static_cast<float>(g) + static_cast<float>(k));
              if (grads[g].data_as<float>()[k] != want) {
                INFO("rank " << r << " gradient " << g << " element " << k);
                REQUIRE(grads[g].data_as<float>()[k] == want);
              }
            }
        }
      }
    }
  }
}

TEST_CASE("Gloo ranks - a peer that never reduces makes wait throw io_error") {
  MemoryStore store;
  std::string error;
  std::atomic<bool> done{false};
  test::run_ranks(2, [&](int r) {
    auto comm = make_gloo_communicator(store, "data-grads", r, {0, 1}, milliseconds(1000));
    if (r == 1) {  // stays connected but never reduces
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    CpuBackend backend(1);
    auto grads = make_grads(kSizes, 0);
    GradSync sync(grads, *comm, GradSync::Mode::kOverlap, 1);
    for (int64_t i = 3; i >= 0; --i) sync.mark_ready(backend, i);
    try {
      sync.wait(backend);
    } catch (const Error& e) {
      error = e.what();
    }
    done = true;
  });
  CHECK_THAT(error, Catch::Contains("all_reduce") && Catch::Contains("data-grads"));
}

}  // namespace
}  // namespace mtnlg

namespace mtnlg {
namespace {

TEST_CASE(
    "Gloo ranks - reduce-scatter leaves each rank its partition of the sum - tied grads "
    "summed over their group in every mode") {
  // Gradients of 5, 7 and 3 floats, the second tied (e.g. the word embeddings of a first and a
  // last stage); the tied group is every rank here, so a tied gradient is summed over it and then
  // over the data group: n x the sum of the ranks' values.
  const std::vector<int64_t> sizes = {5, 7, 3};
  for (auto mode :
       {GradSync::Mode::kReduceScatter, GradSync::Mode::kAfterBackward, GradSync::Mode::kOverlap}) {
    for (int n : {2, 3}) {
      INFO("ranks " << n << " mode " << static_cast<int>(mode));
      MemoryStore store;
      std::vector<std::vector<float>> flat(static_cast<size_t>(n));  // what each rank ends with
      std::vector<ZeroPartition> layouts(static_cast<size_t>(n));
      test::run_ranks(n, [&](int r) {
        std::vector<int64_t> ids(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
        auto data = make_gloo_communicator(store, "data", r, ids, milliseconds(20000));
        auto tied = make_gloo_communicator(store, "embedding", r, ids, milliseconds(20000));
        CpuBackend backend(1);
        Tensor buffer;
        auto grads = make_buffer_grads(sizes, static_cast<float>(r), buffer,
                                       mode == GradSync::Mode::kReduceScatter ? n : 1);
        GradSync sync(grads, *data, mode, 16, buffer);
        sync.set_tied(tied.get(), {1});
        sync.wait(backend);
        const Tensor& out = mode == GradSync::Mode::kReduceScatter ? sync.partition() : buffer;
        flat[static_cast<size_t>(r)].assign(out.data_as<float>(),
                                            out.data_as<float>() + out.numel());
        if (mode == GradSync::Mode::kReduceScatter) layouts[static_cast<size_t>(r)] = sync.layout();
      });
      // The summed flat gradient: element k of gradient g is sum_r (r + 100 g + k), times n for
      // the tied one; zeros pad it to a multiple of n.
      std::vector<float> want;
      for (size_t g = 0; g < sizes.size(); ++g)
        for (int64_t k = 0; k < sizes[g]; ++k) {
          float sum = 0;
          for (int r = 0; r < n; ++r)
            sum += static_cast<float>(r) + 100.0f * static_cast<float>(g) + static_cast<float>(k);
          want.push_back(g == 1 ? static_cast<float>(n) * sum : sum);
        }
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        const auto& got = flat[static_cast<size_t>(r)];
        if (mode != GradSync::Mode::kReduceScatter) {
          CHECK(got == want);
          continue;
        }
        const ZeroPartition& z = layouts[static_cast<size_t>(r)];
        REQUIRE(static_cast<int64_t>(got.size()) == z.partition_size);
        CHECK(z.partition_size * n >= 15);
        for (int64_t k = 0; k < z.partition_size; ++k) {
          const int64_t global = z.begin + k;
          CHECK(got[static_cast<size_t>(k)] ==
                (global < 15 ? want[static_cast<size_t>(global)] : 0.0f));
        }
      }
    }
  }
}

TEST_CASE("Gloo ranks - grad_reduce_dtype bf16 sums bf16-rounded gradients in half the bytes") {
  // Each rank holds 1 + 2^-10 (+ r 2^-12) in every element: bf16 keeps 8 significant bits, so
  // each rounds to 1 before the sum (2 over two ranks), where the fp32 sum keeps the tail.
  for (auto mode :
       {GradSync::Mode::kAfterBackward, GradSync::Mode::kOverlap, GradSync::Mode::kReduceScatter}) {
    for (DType reduce : {DType::kF32, DType::kBF16}) {
      INFO("mode " << static_cast<int>(mode) << " reduce " << dtype_name(reduce));
      MemoryStore store;
      std::vector<std::vector<float>> got(2);
      std::vector<int64_t> bytes(2);
      test::run_ranks(2, [&](int r) {
        auto comm = make_gloo_communicator(store, "data-grads", r, {0, 1}, milliseconds(20000));
        CpuBackend backend(1);
        Tensor buffer;
        auto grads = make_buffer_grads({64, 100}, 0.0f, buffer);
        const float v =
            1.0f + std::ldexp(1.0f, -10) + static_cast<float>(r) * std::ldexp(1.0f, -12);
        for (auto& g : grads) backend.fill(g, v);
        const int64_t before = backend.live_bytes();
        GradSync sync(grads, *comm, mode, 4096, buffer, reduce, &backend);
        // Its own buffers come from the backend (so the planner can count them): ZeRO-1's
        // partition [82] in f32; the bf16 copies the sum runs in (all 164 gradients; ZeRO-1:
        // the buffer and the partition); none when the buckets reduce in place.
        const bool scatter = mode == GradSync::Mode::kReduceScatter;
        const int64_t staging = reduce == DType::kBF16 ? 2 * (scatter ? 164 + 82 : 164) : 0;
        CHECK(backend.live_bytes() - before == (scatter ? 4 * 82 : 0) + staging);
        if (!scatter) CHECK(sync.in_place() == (reduce == DType::kF32));
        if (mode == GradSync::Mode::kOverlap)
          for (int64_t i = 0; i < 2; ++i) sync.mark_ready(backend, i);
        sync.wait(backend);
        const Tensor& out = mode == GradSync::Mode::kReduceScatter ? sync.partition() : buffer;
        for (int64_t i = 0; i < out.numel(); ++i) got[r].push_back(out.data_as<float>()[i]);
        bytes[r] = comm->bytes_sent();
      });
      const float fp32_sum = 2.0f + 2 * std::ldexp(1.0f, -10) + std::ldexp(1.0f, -12);
      for (int r = 0; r < 2; ++r) {
        REQUIRE_FALSE(got[r].empty());
        for (float x : got[r]) REQUIRE(x == (reduce == DType::kBF16 ? 2.0f : fp32_sum));
      }
      // 164 gradient elements: all-reduce 2(n-1)/n x bytes, reduce-scatter (n-1)/n x bytes.
      const int64_t elem = reduce == DType::kBF16 ? 2 : 4;
      CHECK(bytes[0] == (mode == GradSync::Mode::kReduceScatter ? 164 / 2 : 164) * elem);
    }
  }
}

}  // namespace
}  // namespace mtnlg
