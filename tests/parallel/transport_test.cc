// The transport factory (parallel/transport.h): the options it resolves from the recipe's choice
// and the environment, and the transport each group of a rank gets. Ranks are threads over one
// MemoryStore; worker threads only record, the main thread checks.
#include "parallel/transport.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "parallel/store.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using std::chrono::milliseconds;

// Unsets the factory's variables on the way out, whatever a check did.
struct CleanEnv {
  CleanEnv() { clear(); }
  ~CleanEnv() { clear(); }
  static void clear() {
    for (const char* v : {"MTNLG_TRANSPORT", "MTNLG_SHM_SINGLE_COPY", "MTNLG_GLOO_IFACE",
                          "GLOO_SOCKET_IFNAME", "MTNLG_GLOO_HOSTNAME"})
      ::unsetenv(v);
  }
};

TEST_CASE("resolve: the recipe's choice and timeout reach every transport's options") {
  CleanEnv env;
  const TransportOptions o = TransportOptions::resolve(Transport::kTcp, milliseconds(4321));
  CHECK(o.transport == Transport::kTcp);
  CHECK(o.timeout == milliseconds(4321));
  CHECK(o.shm.timeout == milliseconds(4321));
  CHECK(o.tcp.timeout == milliseconds(4321));
  CHECK(o.gloo.timeout == milliseconds(4321));
  CHECK(o.shm.single_copy);
  CHECK(o.tcp.iface.empty());
}

TEST_CASE("resolve: the environment's switches, read once, go to the transports that use them") {
  CleanEnv env;
  ::setenv("MTNLG_TRANSPORT", "gloo", 1);
  ::setenv("MTNLG_SHM_SINGLE_COPY", "0", 1);
  ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
  ::setenv("MTNLG_GLOO_HOSTNAME", "127.0.0.1", 1);
  const TransportOptions o = TransportOptions::resolve(Transport::kShm, milliseconds(1000));
  CHECK(o.transport == Transport::kGloo);  // MTNLG_TRANSPORT wins over the recipe
  CHECK_FALSE(o.shm.single_copy);
  CHECK(o.tcp.iface == "lo");
  CHECK(o.gloo.iface == "lo");
  CHECK(o.tcp.hostname == "127.0.0.1");
  CHECK(o.gloo.hostname == "127.0.0.1");
  ::setenv("MTNLG_TRANSPORT", "infiniband", 1);
  CHECK_THROWS_WITH(TransportOptions::resolve(Transport::kAuto, milliseconds(1000)),
                    Catch::Contains("MTNLG_TRANSPORT=infiniband"));
}

// Every group of a rank (the checkpoint group too) over the transport the options name: shared
// memory (the threads share a node), our TCP, or Gloo's.
TEST_CASE("make_host_groups puts every group of a rank on the options' transport") {
  CleanEnv env;
  for (const auto& [choice, want] :
       {std::pair{Transport::kAuto, "shm"}, std::pair{Transport::kTcp, "tcp"},
        std::pair{Transport::kGloo, "gloo"}}) {
    INFO("parallel.transport " << cpu_transport_name(choice));
    const ParallelSizes sizes{2, 1, 2};
    const int n = static_cast<int>(sizes.world());
    MemoryStore store;
    const TransportOptions options = TransportOptions::resolve(choice, milliseconds(20000));
    std::vector<std::vector<std::string>> got(n);
    test::run_ranks(n, [&](int r) {
      ProcessGroups g = make_host_groups(Topology(sizes, r), store, options);
      for (Communicator* c :
           {g.world.get(), g.tensor.get(), g.data.get(), g.data_grads.get(), g.checkpoint.get()}) {
        Tensor t = Tensor::cpu({1}, DType::kF32);
        t.data_as<float>()[0] = 1.0f;
        c->all_reduce(t, ReduceOp::kSum);
        got[r].push_back(std::string(c->transport()) + ":" +
                         std::to_string(static_cast<int>(t.data_as<float>()[0])));
      }
    });
    for (int r = 0; r < n; ++r)
      CHECK(got[r] == std::vector<std::string>{std::string(want) + ":4", std::string(want) + ":2",
                                               std::string(want) + ":2", std::string(want) + ":2",
                                               std::string(want) + ":4"});
  }
}

}  // namespace
}  // namespace mtnlg
