// Gloo communicators with ranks as threads over one MemoryStore (as gloo/test/base_test.h).
// Worker threads never touch Catch (not thread-safe): they record results, the main thread checks.
#include "parallel/communicator.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <thread>

#include "parallel/gloo_communicator.h"
#include "parallel/shm_communicator.h"
#include "parallel/store.h"
#include "parallel/topology.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using test::run_ranks;

using std::chrono::milliseconds;
const milliseconds kTimeout(20000);

std::vector<int64_t> iota(int n) {
  std::vector<int64_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Each test runs over every transport: Gloo's TCP, ours (parallel/tcp_communicator.h) and shared
// memory (parallel/shm_communicator.h).
std::unique_ptr<Communicator> world(MemoryStore& store, int rank, int n, Transport transport) {
  auto c = make_host_communicator(store, "world", rank, iota(n),
                                  TransportOptions::resolve(transport, kTimeout));
  // A group of several ranks of one process always maps its segment.
  if (n > 1 && transport == Transport::kShm && std::string(c->transport()) != "shm")
    throw std::logic_error("expected a shared-memory communicator");
  return c;
}

const char* transport_name(Transport t) {
  return t == Transport::kShm ? "shm" : t == Transport::kTcp ? "tcp" : "gloo";
}

// Uneven, sign-mixed small integers: exact in every dtype, and max differs from sum.
double value(int rank, int64_t i) {
  return static_cast<double>((rank * 7 + i * 3) % 11 - 5);
}

template <typename T>
Tensor filled(int rank, int64_t n, int64_t offset = 0) {
  Tensor t = Tensor::cpu({n}, dtype_of<T>());
  for (int64_t i = 0; i < n; ++i) t.data_as<T>()[i] = static_cast<T>(value(rank, i + offset));
  return t;
}

template <typename T>
std::vector<double> values(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<double>(t.data_as<T>()[i]);
  return v;
}

double reduce(int n, int64_t i, ReduceOp op) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r)
    acc = op == ReduceOp::kSum ? acc + value(r, i) : std::max(acc, value(r, i));
  return acc;
}

// Bf16, F16: the test values and their sums are small integers, exact in bf16 and fp16.
TEMPLATE_TEST_CASE("all_reduce over 1-4 ranks - sum and max", "", float, double, int32_t, Bf16,
                   F16) {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  for (int n = 1; n <= 4; ++n) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      for (int64_t numel : {int64_t{3}, int64_t{1001}}) {  // fewer elements than ranks, too
        INFO("ranks " << n << ", " << reduce_op_name(op) << ", numel " << numel);
        MemoryStore store;
        std::vector<std::vector<double>> got(n);
        std::vector<int64_t> bytes(n);
        run_ranks(n, [&](int r) {
          auto comm = world(store, r, n, tr);
          Tensor t = filled<TestType>(r, numel);
          comm->all_reduce(t, op);
          got[r] = values<TestType>(t);
          bytes[r] = comm->bytes_sent();
        });
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < numel; ++i) REQUIRE(got[r][i] == reduce(n, i, op));
          CHECK(bytes[r] == 2 * (n - 1) * numel * int64_t(sizeof(TestType)) / n);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("reduce_scatter gives rank r chunk r of the reduction", "", float, double,
                   int32_t, Bf16, F16) {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  // Chunks of one element, a non-power-of-two and a larger one; one communicator runs them all
  // back to back (with an all_reduce between, whose transfers must not mix with the ring's).
  const std::vector<int64_t> chunks = {1, 5, 1001};
  for (int n = 1; n <= 4; ++n) {
    INFO("ranks " << n);
    MemoryStore store;
    // Per rank: for each (op, chunk) the output, then the all_reduce's.
    std::vector<std::vector<std::vector<double>>> got(n);
    std::vector<int64_t> bytes(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (int64_t chunk : chunks) {
          Tensor in = filled<TestType>(r, n * chunk);
          Tensor out = Tensor::cpu({chunk}, dtype_of<TestType>());
          comm->reduce_scatter(out, in, op);
          got[r].push_back(values<TestType>(out));
          // reduce_scatter leaves its input alone.
          got[r].push_back(values<TestType>(in));
        }
        Tensor t = filled<TestType>(r, 7);
        comm->all_reduce(t, op);
        got[r].push_back(values<TestType>(t));
      }
      bytes[r] = comm->bytes_sent();
    });
    for (int r = 0; r < n; ++r) {
      size_t k = 0;
      int64_t want_bytes = 0;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (int64_t chunk : chunks) {
          INFO("rank " << r << ", " << reduce_op_name(op) << ", chunk " << chunk);
          REQUIRE(got[r][k].size() == size_t(chunk));
          for (int64_t i = 0; i < chunk; ++i) REQUIRE(got[r][k][i] == reduce(n, r * chunk + i, op));
          ++k;
          REQUIRE(got[r][k] == values<TestType>(filled<TestType>(r, n * chunk)));
          ++k;
          want_bytes += (n - 1) * n * chunk * int64_t(sizeof(TestType)) / n;
        }
        for (int64_t i = 0; i < 7; ++i) REQUIRE(got[r][k][i] == reduce(n, i, op));
        ++k;
        want_bytes += 2 * (n - 1) * 7 * int64_t(sizeof(TestType)) / n;
      }
      CHECK(bytes[r] == want_bytes);
    }
  }
}

TEST_CASE("reduce_scatter on an odd ring of 3 and 5 ranks - in place of chunk r") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  // out may be chunk r of in itself (the one chunk the ring reads only at its last step).
  for (int n : {3, 5}) {
    INFO("ranks " << n);
    const int64_t chunk = 37;
    MemoryStore store;
    std::vector<std::vector<double>> got(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      Tensor in = filled<float>(r, n * chunk);
      Tensor out = in.slice(r * chunk, (r + 1) * chunk);
      comm->reduce_scatter(out, in, ReduceOp::kSum);
      got[r] = values<float>(out);
    });
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < chunk; ++i)
        REQUIRE(got[r][i] == reduce(n, r * chunk + i, ReduceOp::kSum));
  }
}

TEMPLATE_TEST_CASE("all_gather puts rank r's input in chunk r", "", float, double, int32_t, Bf16,
                   F16) {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  const int64_t chunk = 7;
  for (int n = 1; n <= 4; ++n) {
    INFO("ranks " << n);
    MemoryStore store;
    std::vector<std::vector<double>> got(n);
    std::vector<int64_t> bytes(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      Tensor in = filled<TestType>(r, chunk);
      Tensor out = Tensor::cpu({n * chunk}, dtype_of<TestType>());
      comm->all_gather(out, in);
      got[r] = values<TestType>(out);
      bytes[r] = comm->bytes_sent();
    });
    for (int r = 0; r < n; ++r) {
      for (int src = 0; src < n; ++src)
        for (int64_t i = 0; i < chunk; ++i) REQUIRE(got[r][src * chunk + i] == value(src, i));
      CHECK(bytes[r] == (n - 1) * n * chunk * int64_t(sizeof(TestType)) / n);
    }
  }
}

TEMPLATE_TEST_CASE("broadcast copies the root's tensor to every rank", "", float, double, int32_t,
                   Bf16, F16) {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  for (int n = 1; n <= 4; ++n) {
    for (int root = 0; root < n; ++root) {
      INFO("ranks " << n << ", root " << root);
      MemoryStore store;
      std::vector<std::vector<double>> got(n);
      run_ranks(n, [&](int r) {
        auto comm = world(store, r, n, tr);
        Tensor t = filled<TestType>(r, 33);
        comm->broadcast(t, root);
        got[r] = values<TestType>(t);
      });
      for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < 33; ++i) REQUIRE(got[r][i] == value(root, i));
    }
  }
}

TEST_CASE("send/recv around a ring - twice - in order") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  for (int n = 2; n <= 4; ++n) {
    INFO("ranks " << n);
    MemoryStore store;
    std::vector<std::vector<double>> first(n), second(n);
    std::vector<int64_t> bytes(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      Tensor a = filled<float>(r, 9), b = filled<float>(r, 4, 100);
      Tensor ra = Tensor::cpu({9}, DType::kF32), rb = Tensor::cpu({4}, DType::kF32);
      // Sends pair with receives: rank 0 sends first, everyone else receives first.
      if (r == 0) {
        comm->send(a, next);
        comm->send(b, next);
      }
      comm->recv(ra, prev);
      comm->recv(rb, prev);
      if (r != 0) {
        comm->send(a, next);
        comm->send(b, next);
      }
      first[r] = values<float>(ra);
      second[r] = values<float>(rb);
      bytes[r] = comm->bytes_sent();
    });
    for (int r = 0; r < n; ++r) {
      const int prev = (r + n - 1) % n;
      for (int64_t i = 0; i < 9; ++i) REQUIRE(first[r][i] == value(prev, i));
      for (int64_t i = 0; i < 4; ++i) REQUIRE(second[r][i] == value(prev, i + 100));
      CHECK(bytes[r] == 13 * 4);
    }
  }
}

TEST_CASE("batch_send_recv: every rank sends both ways around a ring at once") {
  // Each rank sends to its next and previous rank and receives from both in one batch: with plain
  // send() then recv() on every rank, messages larger than a transport's buffering deadlock (the
  // 0.4 MB ones exceed the shared-memory ring, the 2.4 MB ones go single copy). Two ranks make
  // next == previous: two sends to one peer in one batch, matched in order.
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  const int64_t len = GENERATE(int64_t{9}, int64_t{100003}, int64_t{600001});
  INFO("transport " << transport_name(tr) << ", " << len << " floats");
  for (int n = 2; n <= 4; ++n) {
    INFO("ranks " << n);
    MemoryStore store;
    std::vector<int> ok(n, 0);
    std::vector<int64_t> bytes(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      // Forward traffic carries offset 0, backward offset 1000: a swapped pair shows.
      Tensor fwd = filled<float>(r, len), bwd = filled<float>(r, len, 1000);
      Tensor from_prev = Tensor::cpu({len}, DType::kF32),
             from_next = Tensor::cpu({len}, DType::kF32);
      std::vector<P2POp> ops{
          {true, fwd, next}, {true, bwd, prev}, {false, from_prev, prev}, {false, from_next, next}};
      comm->batch_send_recv(ops);
      // And a second batch on the same pairs, continuing their order.
      Tensor again = Tensor::cpu({len}, DType::kF32);
      std::vector<P2POp> more{{false, again, prev}, {true, fwd, next}};
      comm->batch_send_recv(more);
      ok[r] = values<float>(from_prev) == values<float>(filled<float>(prev, len)) &&
              values<float>(from_next) == values<float>(filled<float>(next, len, 1000)) &&
              values<float>(again) == values<float>(filled<float>(prev, len));
      bytes[r] = comm->bytes_sent();
    });
    for (int r = 0; r < n; ++r) {
      CHECK(ok[r] == 1);
      CHECK(bytes[r] == 3 * len * 4);
    }
  }
}

TEST_CASE("the same group created twice on one store gets fresh keys") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  MemoryStore store;
  std::vector<double> got(3);
  run_ranks(3, [&](int r) {
    auto first = world(store, r, 3, tr);
    auto second = world(store, r, 3, tr);
    Tensor t = filled<double>(r, 1);
    second->all_reduce(t, ReduceOp::kSum);
    first->all_reduce(t, ReduceOp::kSum);
    got[r] = t.data_as<double>()[0];
  });
  for (int r = 0; r < 3; ++r) CHECK(got[r] == 3 * reduce(3, 0, ReduceOp::kSum));
}

TEST_CASE("barrier: no rank leaves before every rank arrived") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  for (int n = 1; n <= 4; ++n) {
    MemoryStore store;
    std::atomic<int> arrived{0};
    std::vector<int> seen(n);
    run_ranks(n, [&](int r) {
      auto comm = world(store, r, n, tr);
      std::this_thread::sleep_for(milliseconds(20 * r));
      arrived++;
      comm->barrier();
      seen[r] = arrived.load();
    });
    for (int r = 0; r < n; ++r) CHECK(seen[r] == n);
  }
}

TEST_CASE("a one-rank group returns at once - reduce_scatter and all_gather copy") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  MemoryStore store;
  auto comm = world(store, 0, 1, tr);
  CHECK(comm->size() == 1);
  CHECK(comm->rank() == 0);
  CHECK(comm->name() == "world");
  Tensor t = filled<float>(0, 6), out = Tensor::cpu({6}, DType::kF32);
  comm->all_reduce(t, ReduceOp::kSum);
  comm->broadcast(t, 0);
  comm->barrier();
  CHECK(values<float>(t) == values<float>(filled<float>(0, 6)));
  comm->reduce_scatter(out, t, ReduceOp::kSum);
  CHECK(values<float>(out) == values<float>(t));
  comm->all_gather(out, filled<float>(0, 6, 1));
  CHECK(values<float>(out) == values<float>(filled<float>(0, 6, 1)));
  CHECK(comm->bytes_sent() == 0);
}

TEST_CASE("wrong sizes and dtypes name the op - the group and the sizes") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  MemoryStore store;
  auto comm = world(store, 0, 1, tr);
  Tensor in = Tensor::cpu({6}, DType::kF32), out = Tensor::cpu({4}, DType::kF32);
  REQUIRE_THROWS_WITH(comm->reduce_scatter(out, in, ReduceOp::kSum),
                      Catch::Contains("reduce_scatter") && Catch::Contains("'world'") &&
                          Catch::Contains("f32[6]") && Catch::Contains("f32[4]"));
  REQUIRE_THROWS_WITH(comm->all_gather(out, in), Catch::Contains("all_gather"));
  Tensor i32 = Tensor::cpu({4}, DType::kI32);
  REQUIRE_THROWS_WITH(comm->all_gather(out, i32), Catch::Contains("one dtype"));
  Tensor f64x = Tensor::cpu({2}, DType::kF64);
  REQUIRE_THROWS_WITH(comm->all_gather(out, f64x), Catch::Contains("one dtype"));
  REQUIRE_THROWS_WITH(comm->send(out, 0), Catch::Contains("send") && Catch::Contains("peer 0"));
}

// One rank never joins: the others fail within the timeout, naming group, op and a peer.
// op: "all_reduce" or "reduce_scatter".
void timeout_case(int n, Transport transport, const std::string& op = "all_reduce") {
  MemoryStore store;
  std::vector<std::string> errors(n);
  std::vector<double> seconds(n);
  std::vector<std::string> second_errors(n);
  std::atomic<int> done{0};
  run_ranks(n, [&](int r) {
    auto comm = make_host_communicator(store, "world", r, iota(n),
                                       TransportOptions::resolve(transport, milliseconds(1000)));
    if (r == n - 1) {  // the absent rank: stays connected but never calls the op
      while (done.load() < n - 1) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    Tensor t = filled<float>(r, 100), out = Tensor::cpu({100 / n}, DType::kF32);
    if (op == "reduce_scatter") t = filled<float>(r, n * (100 / n));
    const auto start = std::chrono::steady_clock::now();
    try {
      if (op == "reduce_scatter")
        comm->reduce_scatter(out, t, ReduceOp::kSum);
      else
        comm->all_reduce(t, ReduceOp::kSum);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
    seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    try {
      comm->barrier();
    } catch (const Error& e) {
      second_errors[r] = e.what();
    }
    done++;
  });
  bool named_absent = false;
  for (int r = 0; r < n - 1; ++r) {
    INFO("rank " << r << " after " << seconds[r] << " s: " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains(op + " of") && Catch::Contains("group 'world'") &&
                              Catch::Contains("peer rank"));
    CHECK(seconds[r] < 5.0);  // the timeout is 1 s
    CHECK_THAT(second_errors[r], Catch::Contains("failed earlier"));
    named_absent |= errors[r].find("peer rank " + std::to_string(n - 1)) != std::string::npos;
    WARN("timeout case, " << op << ", " << n << " ranks: rank " << r << " failed after "
                          << seconds[r] << " s");
  }
  CHECK(named_absent);
}

TEST_CASE("a rank that never joins makes the others time out - naming the peer") {
  const Transport tr = GENERATE(Transport::kGloo, Transport::kTcp, Transport::kShm);
  INFO("transport " << transport_name(tr));
  SECTION("2 ranks") {
    timeout_case(2, tr);
  }
  SECTION("3 ranks") {
    timeout_case(3, tr);
  }
  SECTION("reduce_scatter - 2 ranks") {
    timeout_case(2, tr, "reduce_scatter");
  }
  SECTION("reduce_scatter - 3 ranks") {
    timeout_case(3, tr, "reduce_scatter");
  }
  SECTION("reduce_scatter - 4 ranks") {
    timeout_case(4, tr, "reduce_scatter");
  }
}

TEST_CASE("shared memory: multi-megabyte tensors, a long send stream, and MTNLG_TRANSPORT") {
  // 3 MB tensors cross many 256 KiB reduction pieces and 128 KiB ring wraps; with single copy (the
  // default where the kernel allows it, as here) broadcast, all_gather and sends of 2 MiB or more
  // read the owner's memory instead. Both ways must give the same bits.
  const bool single_copy = GENERATE(true, false);
  INFO("MTNLG_SHM_SINGLE_COPY=" << single_copy);
  ::setenv("MTNLG_SHM_SINGLE_COPY", single_copy ? "1" : "0", 1);
  const int n = 3;
  const int64_t big = 3 * 250000 + 7;
  MemoryStore store;
  std::vector<int> ok(n, 0);
  std::vector<std::string> where(n);
  run_ranks(n, [&](int r) {
    auto comm = world(store, r, n, Transport::kShm);
    where[r] = comm->description();
    Tensor t = filled<float>(r, big);
    comm->all_reduce(t, ReduceOp::kSum);
    bool good = true;
    for (int64_t i = 0; i < big; i += 997)
      good = good && t.data_as<float>()[i] == reduce(n, i, ReduceOp::kSum);
    Tensor in = filled<float>(r, n * 300001), out = Tensor::cpu({300001}, DType::kF32);
    comm->reduce_scatter(out, in, ReduceOp::kSum);
    for (int64_t i = 0; i < 300001; i += 991)
      good = good && out.data_as<float>()[i] == reduce(n, r * 300001 + i, ReduceOp::kSum);
    // Rank 0 streams 10 tensors of 0.4 MB to rank 1 before rank 1 reads any (the ring fills and
    // the sender waits); rank 2 broadcasts.
    if (r == 0)
      for (int k = 0; k < 10; ++k) comm->send(filled<float>(k, 100003), 1);
    if (r == 1) {
      for (int k = 0; k < 10; ++k) {
        Tensor got = Tensor::cpu({100003}, DType::kF32);
        comm->recv(got, 0);
        good = good && values<float>(got) == values<float>(filled<float>(k, 100003));
      }
    }
    Tensor b = filled<double>(r, 200000);
    comm->broadcast(b, 2);
    good = good && values<double>(b) == values<double>(filled<double>(2, 200000));
    // All-gather of 2.4 MB per rank (every rank reads both others), and an interleaving of ring
    // and single-copy sends on one pair: small, large, small, large, in order.
    Tensor gin = filled<float>(r, 600001), gout = Tensor::cpu({n * 600001}, DType::kF32);
    comm->all_gather(gout, gin);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < 600001; i += 1009)
        good = good && gout.data_as<float>()[q * 600001 + i] == value(q, i);
    // Either side of the single-copy threshold (8 KiB of one rank's part), each rank rooting one
    // broadcast: 2047 and 2048 floats, and 2049 (a part not a multiple of 16 bytes).
    for (const int64_t m : {int64_t{2047}, int64_t{2048}, int64_t{2049}}) {
      Tensor bc = filled<float>(r, m);
      comm->broadcast(bc, int(m % n));
      good = good && values<float>(bc) == values<float>(filled<float>(int(m % n), m));
      Tensor part = filled<float>(r + 7, m), all = Tensor::cpu({n * m}, DType::kF32);
      comm->all_gather(all, part);
      for (int q = 0; q < n; ++q)
        for (int64_t i = 0; i < m; ++i)
          good = good && all.data_as<float>()[q * m + i] == value(q + 7, i);
    }
    const std::vector<int64_t> sizes = {5, 600000, 33, 40000, 700001};
    if (r == 1)
      for (size_t k = 0; k < sizes.size(); ++k) comm->send(filled<float>(int(k), sizes[k]), 2);
    if (r == 2) {
      for (size_t k = 0; k < sizes.size(); ++k) {
        Tensor got = Tensor::cpu({sizes[k]}, DType::kF32);
        comm->recv(got, 1);
        good = good && values<float>(got) == values<float>(filled<float>(int(k), sizes[k]));
      }
    }
    ok[r] = good;
  });
  ::unsetenv("MTNLG_SHM_SINGLE_COPY");
  for (int r = 0; r < n; ++r) {
    CHECK(ok[r] == 1);
    CHECK((where[r].find("single copy") != std::string::npos) == single_copy);
  }

  ::setenv("MTNLG_TRANSPORT", "tcp", 1);
  CHECK(transport_from_env() == Transport::kTcp);
  ::setenv("MTNLG_TRANSPORT", "shm", 1);
  CHECK(transport_from_env() == Transport::kShm);
  ::setenv("MTNLG_TRANSPORT", "gloo", 1);
  CHECK(transport_from_env() == Transport::kGloo);
  ::setenv("MTNLG_TRANSPORT", "infiniband", 1);
  CHECK_THROWS_WITH(transport_from_env(), Catch::Contains("MTNLG_TRANSPORT=infiniband"));
  ::unsetenv("MTNLG_TRANSPORT");
  CHECK(transport_from_env() == Transport::kAuto);
  ::setenv("MTNLG_SHM_SINGLE_COPY", "yes", 1);
  CHECK_THROWS_WITH(single_copy_from_env(), Catch::Contains("MTNLG_SHM_SINGLE_COPY=yes"));
  ::unsetenv("MTNLG_SHM_SINGLE_COPY");
  CHECK(single_copy_from_env());
}

TEST_CASE("shared memory single copy: a receiver expecting another size fails naming both") {
  MemoryStore store;
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int r) {
    auto comm = make_host_communicator(
        store, "world", r, iota(2), TransportOptions::resolve(Transport::kShm, milliseconds(2000)));
    try {
      if (r == 0) comm->send(filled<float>(0, 600000), 1);
      if (r == 1) {
        Tensor got = Tensor::cpu({650000}, DType::kF32);
        comm->recv(got, 0);
      }
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  CHECK_THAT(errors[1], Catch::Contains("sent 2400000 bytes, this rank expects 2600000"));
  CHECK_THAT(errors[1], Catch::Contains("peer rank 0"));
  // The sender waited for a receipt that never came: a timeout naming the receiver.
  CHECK_THAT(errors[0], Catch::Contains("send of") && Catch::Contains("peer rank 1"));
}

TEST_CASE("shared memory spins before it sleeps only while the node's ranks fit its cores") {
  using std::chrono::microseconds;
  CHECK(shm_spin(2, 2, 2) == microseconds(250));
  CHECK(shm_spin(1, 2, 16) == microseconds(250));  // the launcher's count unknown (1)
  CHECK(shm_spin(8, 2, 2) == microseconds(0));     // a group of 2 among 8 ranks on 2 cores
  CHECK(shm_spin(1, 4, 2) == microseconds(0));     // the group alone is more than the cores
  CHECK(shm_spin(8, 8, 0) == microseconds(0));     // cores unknown
}

TEST_CASE("make_host_groups builds this rank's groups of a Topology") {
  for (ParallelSizes sizes :
       {ParallelSizes{2, 2, 1}, ParallelSizes{2, 1, 2}, ParallelSizes{1, 3, 1}}) {
    const int n = static_cast<int>(sizes.world());
    INFO("tp " << sizes.tensor << ", pp " << sizes.pipeline << ", dp " << sizes.data);
    MemoryStore store;
    // Per rank and group: {rank, size, sum of global ranks over the group} or {-1} if absent.
    std::vector<std::vector<std::vector<double>>> got(n);
    run_ranks(n, [&](int r) {
      const Topology topo(sizes, r);
      ProcessGroups g =
          make_host_groups(topo, store, TransportOptions::resolve(Transport::kGloo, kTimeout));
      for (Communicator* c :
           {g.world.get(), g.tensor.get(), g.data.get(), g.pipeline.get(), g.embedding.get()}) {
        if (!c) {
          got[r].push_back({-1});
          continue;
        }
        Tensor t = Tensor::cpu({1}, DType::kF64);
        t.data_as<double>()[0] = r;
        c->all_reduce(t, ReduceOp::kSum);
        got[r].push_back({double(c->rank()), double(c->size()), t.data_as<double>()[0]});
      }
    });
    auto sum = [](const std::vector<int64_t>& g) {
      double s = 0;
      for (auto x : g) s += double(x);
      return s;
    };
    for (int r = 0; r < n; ++r) {
      const Topology topo(sizes, r);
      CHECK(got[r][0] == std::vector<double>{double(r), double(n), double(n * (n - 1) / 2)});
      CHECK(got[r][1] == std::vector<double>{double(topo.tensor_rank()), double(sizes.tensor),
                                             sum(topo.tensor_group())});
      CHECK(got[r][2] == std::vector<double>{double(topo.data_rank()), double(sizes.data),
                                             sum(topo.data_group())});
      CHECK(got[r][3] == std::vector<double>{double(topo.pipeline_rank()), double(sizes.pipeline),
                                             sum(topo.pipeline_group())});
      const auto emb = topo.embedding_group();
      if (topo.is_first_stage() || topo.is_last_stage())
        CHECK(got[r][4][2] == sum(emb));
      else
        CHECK(got[r][4] == std::vector<double>{-1});
    }
  }
}

}  // namespace
}  // namespace mtnlg
