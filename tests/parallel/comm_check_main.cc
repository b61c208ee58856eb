// mtnlg-comm-check: run under a launcher (mpirun, srun --mpi=pmix) to check the PMIx runtime and
// the CPU communicators on real processes. Each rank runs every collective on the world group
// (small tensors, and 2.4 MB ones that take the shared-memory transport's single-copy path) and an
// all_reduce on each Topology group, checks the results and prints "rank R: OK (... transport)".
//
//   mtnlg-comm-check [--timeout-s S] [--kill-rank R] [--transport gloo|tcp|shm|auto|nccl]
//                    [--late-rank R --late-ms N] [--watch-rank R --watch-how kill|error]
// --transport: the world group's transport (default gloo; the Topology groups use the same).
// nccl (a CUDA build, one GPU per local rank or NCCL_HOSTID set per rank): the world group over
// NCCL on host tensors, for --kill-rank; the Topology groups then stay on the CPU.
// --kill-rank R: rank R SIGKILLs itself after the first all_reduce; every other rank must then
// fail (exit 1) within the timeout with an error naming the peer.
// --watch-rank R --watch-how kill|error: after the first all_reduce rank R SIGKILLs itself, or
// stops with an error (its Runtime then says so through the store); every other rank watches the
// world's members with a PeerWatch and prints "rank Q: watch: <what it found> (after W ms)" and
// exits 0, or exits 1 if it found nothing within the timeout. kill-early: rank R SIGKILLs itself
// before the world group's rendezvous; the others must fail (exit 1) naming it.
// --late-rank R --late-ms N: rank R joins an all_reduce N ms late; every other rank prints
// "rank Q: waited W ms, cpu C ms" (its process's CPU time over that wait) and exits 0.
#include <time.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "parallel/communicator.h"
#include "parallel/gloo_communicator.h"
#include "parallel/peer_watch.h"
#include "parallel/runtime.h"
#include "parallel/shm_communicator.h"
#include "parallel/topology.h"

#ifdef MTNLG_HAVE_CUDA
#include <cuda_runtime.h>

#include "parallel/cuda/nccl_communicator.h"
#endif

namespace mtnlg {
namespace {

double value(int64_t rank, int64_t i) {
  return static_cast<double>((rank * 7 + i * 3) % 11 - 5);
}

template <typename T>
Tensor filled(int64_t rank, int64_t n) {
  Tensor t = Tensor::cpu({n}, dtype_of<T>());
  for (int64_t i = 0; i < n; ++i) t.data_as<T>()[i] = static_cast<T>(value(rank, i));
  return t;
}

template <typename T>
void expect(const char* what, const Tensor& t, int64_t i, double want) {
  const double got = static_cast<double>(t.data_as<T>()[i]);
  if (got != want)
    throw Error(Code::kInternal, std::string(what) + ": element " + std::to_string(i) + " is " +
                                     std::to_string(got) + ", want " + std::to_string(want));
}

template <typename T>
void check_collectives(Communicator& c, int64_t len) {
  const int n = c.size(), r = c.rank();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    Tensor t = filled<T>(r, len);
    c.all_reduce(t, op);
    for (int64_t i = 0; i < len; ++i) {
      double want = value(0, i);
      for (int q = 1; q < n; ++q)
        want = op == ReduceOp::kSum ? want + value(q, i) : std::max(want, value(q, i));
      expect<T>("all_reduce", t, i, want);
    }
    Tensor in = filled<T>(r, n * 5), out = Tensor::cpu({5}, dtype_of<T>());
    c.reduce_scatter(out, in, op);
    for (int64_t i = 0; i < 5; ++i) {
      double want = value(0, r * 5 + i);
      for (int q = 1; q < n; ++q)
        want =
            op == ReduceOp::kSum ? want + value(q, r * 5 + i) : std::max(want, value(q, r * 5 + i));
      expect<T>("reduce_scatter", out, i, want);
    }
  }
  Tensor in = filled<T>(r, len), out = Tensor::cpu({n * len}, dtype_of<T>());
  c.all_gather(out, in);
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < len; ++i) expect<T>("all_gather", out, q * len + i, value(q, i));
  for (int root = 0; root < n; ++root) {
    Tensor t = filled<T>(r, len);
    c.broadcast(t, root);
    for (int64_t i = 0; i < len; ++i) expect<T>("broadcast", t, i, value(root, i));
  }
  if (n > 1) {  // ring: rank 0 sends first, the others receive first
    Tensor mine = filled<T>(r, len), got = Tensor::cpu({len}, dtype_of<T>());
    if (r == 0) c.send(mine, 1 % n);
    c.recv(got, (r + n - 1) % n);
    if (r != 0) c.send(mine, (r + 1) % n);
    for (int64_t i = 0; i < len; ++i) expect<T>("send/recv", got, i, value((r + n - 1) % n, i));
  }
  c.barrier();
}

double process_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

int run(int argc, char** argv) {
  int64_t timeout_s = 30, kill_rank = -1, late_rank = -1, late_ms = 0, watch_rank = -1;
  std::string watch_how = "kill";
  bool nccl = false;
  Transport transport = Transport::kGloo;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf(
          "mtnlg-comm-check: checks the PMIx runtime and the CPU communicators on real processes;\n"
          "run it under mpirun or srun --mpi=pmix. Each rank runs every collective on the world\n"
          "group and an all_reduce on each Topology group, and prints \"rank R: OK (...)\".\n\n"
          "  --timeout-s S           every wait fails after S seconds (default 30)\n"
          "  --transport T           gloo (default), tcp, shm or auto, as MTNLG_TRANSPORT;\n"
          "                          nccl (CUDA builds): the world group over NCCL\n"
          "  --kill-rank R           rank R SIGKILLs itself after the first all_reduce; the "
          "others\n"
          "                          must fail (exit 1) naming it\n"
          "  --late-rank R           rank R joins an all_reduce --late-ms N ms late; the others\n"
          "  --late-ms N             print \"rank Q: waited W ms, cpu C ms\" and exit 0\n"
          "  --watch-rank R          rank R stops after the first all_reduce (--watch-how kill:\n"
          "  --watch-how kill|error  SIGKILL, error: an exception); the others find it with a\n"
          "                          PeerWatch and print \"rank Q: watch: ...\". kill-early:\n"
          "                          SIGKILL before the rendezvous; the others fail naming it\n");
      return 0;
    }
  }
  if (argc % 2 == 0)
    throw invalid_argument(std::string("flag ") + argv[argc - 1] + " needs a value",
                           "mtnlg-comm-check");
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--timeout-s")) {
      timeout_s = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--kill-rank")) {
      kill_rank = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--late-rank")) {
      late_rank = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--late-ms")) {
      late_ms = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--watch-rank")) {
      watch_rank = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--watch-how")) {
      watch_how = argv[i + 1];
      if (watch_how != "kill" && watch_how != "error" && watch_how != "kill-early")
        throw invalid_argument("--watch-how is kill, error or kill-early, not " + watch_how,
                               "mtnlg-comm-check");
    } else if (!std::strcmp(argv[i], "--transport") && !std::strcmp(argv[i + 1], "nccl")) {
#ifdef MTNLG_HAVE_CUDA
      nccl = true;
#else
      throw invalid_argument("--transport nccl needs a CUDA build (-DMTNLG_CUDA=ON)",
                             "mtnlg-comm-check");
#endif
    } else if (!std::strcmp(argv[i], "--transport")) {
      ::setenv("MTNLG_TRANSPORT", argv[i + 1], 1);
      transport = transport_from_env();
    } else {
      throw invalid_argument(std::string("unknown flag ") + argv[i], "mtnlg-comm-check");
    }
  }
  const std::chrono::milliseconds timeout(timeout_s * 1000);
  Runtime rt = Runtime::init();
  std::vector<int64_t> all(rt.world);
  for (int64_t i = 0; i < rt.world; ++i) all[i] = i;
  try {
    const TransportOptions options = TransportOptions::resolve(transport, timeout);
    // Killed before the world group's rendezvous: the others' get() of its keys names it.
    if (watch_rank == rt.rank && watch_how == "kill-early") {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are waiting
      std::raise(SIGKILL);
    }
    std::unique_ptr<Communicator> world;
#ifdef MTNLG_HAVE_CUDA
    if (nccl) {
      int devices = 0;
      if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        throw invalid_argument("--transport nccl: no CUDA device", "mtnlg-comm-check");
      world = make_nccl_communicator(*rt.store, "world", static_cast<int>(rt.rank), all,
                                     static_cast<int>(rt.local_rank % devices), timeout);
    }
#endif
    if (!world)
      world = make_host_communicator(*rt.store, "world", static_cast<int>(rt.rank), all, options);
    if (watch_rank >= 0) {
      Tensor t = filled<float>(rt.rank, 1000);
      world->all_reduce(t, ReduceOp::kSum);  // everyone started (and wrote its process key)
      if (rt.rank == watch_rank) {
        if (watch_how == "kill") std::raise(SIGKILL);
        // Not an mtnlg::Error, so that it leaves run() and the Runtime says this rank failed.
        throw std::runtime_error("rank " + std::to_string(rt.rank) + " stops, as asked");
      }
      PeerWatch watch(*rt.store, all, static_cast<int>(rt.rank), std::chrono::milliseconds(100),
                      std::chrono::milliseconds(100));
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        const double waited =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (const auto gone = watch.check()) {
          std::printf("rank %lld: watch: %s (after %.0f ms)\n", (long long)rt.rank, gone->c_str(),
                      waited);
          std::fflush(stdout);
          // No survivor leaves before the others have looked: its own end would be news to them.
          rt.store->set(owned_key("watched", rt.rank), {1});
          for (int64_t q = 0; q < rt.world; ++q)
            if (q != watch_rank) rt.store->get(owned_key("watched", q), timeout);
          return 0;
        }
        if (waited > static_cast<double>(timeout.count()))
          throw io_error("the watch found no member gone in " + std::to_string(timeout_s) + " s",
                         "mtnlg-comm-check");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (late_rank >= 0) {  // how much CPU a rank burns while it waits for a late peer
      Tensor t = filled<float>(rt.rank, 1000);
      world->all_reduce(t, ReduceOp::kSum);  // everyone connected and past start-up
      if (rt.rank == late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
      const auto start = std::chrono::steady_clock::now();
      const double cpu = process_cpu_ms();
      world->all_reduce(t, ReduceOp::kSum);
      const double waited =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (rt.rank != late_rank)
        std::printf("rank %lld: waited %.0f ms, cpu %.1f ms\n", (long long)rt.rank, waited,
                    process_cpu_ms() - cpu);
      return 0;
    }
    if (kill_rank >= 0) {
      Tensor t = filled<float>(rt.rank, 1000);
      world->all_reduce(t, ReduceOp::kSum);
      if (rt.rank == kill_rank) std::raise(SIGKILL);
      for (int i = 0; i < 5; ++i) world->all_reduce(t, ReduceOp::kSum);
      std::printf("rank %lld: no failure after rank %lld died\n", (long long)rt.rank,
                  (long long)kill_rank);
      return 2;
    }
    for (int64_t len : {int64_t{33}, int64_t{600001}}) {
      check_collectives<float>(*world, len);
      check_collectives<double>(*world, len);
      check_collectives<int32_t>(*world, len);
    }
    if (nccl) {
      std::printf("rank %lld: OK (%s; %s)\n", (long long)rt.rank, rt.describe().c_str(),
                  world->description().c_str());
      return 0;
    }
    const int64_t tp = rt.world % 2 == 0 ? 2 : 1, pp = rt.world % 4 == 0 ? 2 : 1;
    const Topology topo(Topology::derive(rt.world, tp, pp), rt.rank);
    ProcessGroups g = make_host_groups(topo, *rt.store, options);
    for (Communicator* c : {g.tensor.get(), g.data.get(), g.pipeline.get(), g.embedding.get()}) {
      if (!c) continue;
      Tensor t = Tensor::cpu({1}, DType::kI32);
      t.data_as<int32_t>()[0] = 1;
      c->all_reduce(t, ReduceOp::kSum);
      expect<int32_t>(c->name().c_str(), t, 0, c->size());
    }
    std::printf("rank %lld: OK (%s; %s; %s)\n", (long long)rt.rank, rt.describe().c_str(),
                topo.describe().c_str(), world->description().c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %lld: FAILED: %s\n", (long long)rt.rank, e.what());
    return 1;
  }
}

}  // namespace
}  // namespace mtnlg

int main(int argc, char** argv) {
  try {
    return mtnlg::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mtnlg-comm-check: %s\n", e.what());
    return 1;
  }
}
