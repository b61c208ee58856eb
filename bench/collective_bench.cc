// mtnlg-bench-collective: time per collective and bus bandwidth over message sizes, as
// nccl-tests' all_reduce_perf does, for our CPU communicators (shared memory within a node, or
// Gloo's TCP: --transport) on real processes. Run it under a launcher: mpirun -np 2
// build/bench/mtnlg-bench-collective [--op all_reduce] [--transport tcp] [--iters 50].
// Rank 0 prints one row per size: bytes, mean time per call (after warm-up), the algorithm
// bandwidth (bytes / time) and the bus bandwidth (bytes_sent() / time, nccl-tests' convention).
// --op send_recv is a ping-pong between ranks 0 and 1 (as MPI_Sendrecv benchmarks time it): the
// time is half a round trip. bench/comm_bench.sh runs it beside Open MPI's own.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "core/logging.h"
#include "core/status.h"
#include "parallel/gloo_communicator.h"
#include "parallel/runtime.h"
#include "parallel/shm_communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

// One call of `op` on `t` (all-reduce in place; reduce-scatter/all-gather between t and a
// buffer of the matching size).
void call(mtnlg::Communicator& c, const std::string& op, mtnlg::Tensor& t, mtnlg::Tensor& other) {
  if (op == "all_reduce") {
    c.all_reduce(t, mtnlg::ReduceOp::kSum);
  } else if (op == "reduce_scatter") {
    c.reduce_scatter(other, t, mtnlg::ReduceOp::kSum);
  } else if (op == "all_gather") {
    c.all_gather(t, other);
  } else if (op == "send_recv") {
    // Half of a round trip between ranks 0 and 1, so one call is one one-way transfer.
    if (c.rank() == 0) {
      c.send(t, 1);
      c.recv(t, 1);
    } else if (c.rank() == 1) {
      c.recv(t, 0);
      c.send(t, 0);
    }
  } else {
    c.broadcast(t, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-bench-collective: CPU collective latency and bus bandwidth by message size. Run "
      "under mpirun -np N or srun --mpi=pmix -n N; rank 0 prints the table."};
  std::string op = "all_reduce", transport = "auto";
  int iters = 50, warmup = 5;
  int64_t min_bytes = 1024, max_bytes = 64 << 20;
  app.add_option("--op", op, "all_reduce, reduce_scatter, all_gather, broadcast or send_recv")
      ->check(
          CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv"}))
      ->capture_default_str();
  app.add_option("--transport", transport,
                 "auto (shared memory within a node), tcp (ours), gloo (Gloo's TCP) or shm (as "
                 "MTNLG_TRANSPORT)")
      ->check(CLI::IsMember({"auto", "tcp", "gloo", "shm"}))
      ->capture_default_str();
  app.add_option("--iters", iters, "timed calls per size")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed calls per size first")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--min-bytes", min_bytes, "smallest message (f32, rounded to the group size)")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message; sizes double from the smallest")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  try {
    mtnlg::init_logging("warn");
    mtnlg::Runtime runtime = mtnlg::Runtime::init();
    std::vector<int64_t> ranks(static_cast<size_t>(runtime.world));
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int64_t>(r);
    const mtnlg::Transport tr = transport == "tcp"    ? mtnlg::Transport::kTcp
                                : transport == "gloo" ? mtnlg::Transport::kGloo
                                : transport == "shm"  ? mtnlg::Transport::kShm
                                                      : mtnlg::Transport::kAuto;
    auto comm = mtnlg::make_host_communicator(
        *runtime.store, "world", static_cast<int>(runtime.rank), ranks,
        mtnlg::TransportOptions::resolve(tr, std::chrono::seconds(120)));
    const int64_t n = comm->size();
    if (op == "send_recv" && n < 2)
      throw mtnlg::invalid_argument("send_recv needs 2 ranks", "--op");
    const std::string carrier = comm->transport();
    if (runtime.rank == 0)
      std::printf(
          "%s over %ld ranks (%s), %d calls per size after %d warm-up\n%12s %12s "
          "%14s %14s\n",
          op.c_str(), static_cast<long>(n), carrier.c_str(), iters, warmup, "bytes", "us/call",
          "algbw GB/s", "busbw GB/s");
    const int64_t calls_per_iter = op == "send_recv" ? 2 : 1;  // a round trip is 2 transfers
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      const int64_t elems = std::max<int64_t>(n, bytes / 4 / n * n);
      // all_gather: t is the gathered output, other the local chunk; reduce_scatter: t is the
      // input, other this rank's chunk.
      mtnlg::Tensor t = mtnlg::Tensor::cpu({elems}, mtnlg::DType::kF32);
      mtnlg::Tensor other = mtnlg::Tensor::cpu({elems / n}, mtnlg::DType::kF32);
      for (int i = 0; i < warmup; ++i) call(*comm, op, t, other);
      comm->barrier();
      const int64_t sent0 = comm->bytes_sent();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) call(*comm, op, t, other);
      comm->barrier();
      const double s =
          std::chrono::duration<double>(Clock::now() - t0).count() / iters / calls_per_iter;
      const double bus = static_cast<double>(comm->bytes_sent() - sent0) / iters / calls_per_iter;
      if (runtime.rank == 0)
        std::printf("%12ld %12.1f %14.3f %14.3f\n", static_cast<long>(elems * 4), s * 1e6,
                    static_cast<double>(elems * 4) / s / 1e9, bus / s / 1e9);
    }
    return 0;
  } catch (const mtnlg::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return mtnlg::exit_status(e.code());
  }
}
