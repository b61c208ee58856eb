#include "cmd/memory_check.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/host_memory.h"
#include "core/status.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace mtnlg {
namespace {

constexpr int64_t kFields = 6;  // the RankMemory fields sent per rank

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(1LL << 30);
}

// The recipe key to blame for a term, and the fix.
std::pair<const char*, const char*> term_fix(const std::string& term) {
  if (term == "weights" || term == "gradients")
    return {"model.hidden_size",
            "a smaller model (model.num_layers, model.hidden_size) or more ranks sharing it "
            "(parallel.tensor, parallel.pipeline)"};
  if (term == "master_weights" || term == "adam_moments")
    return {"parallel.zero_stage",
            "parallel.zero_stage: 1 with more data-parallel ranks, more ranks sharing the model "
            "(parallel.tensor, parallel.pipeline), or a smaller model (model.num_layers, "
            "model.hidden_size)"};
  if (term == "activations")
    return {"parallel.micro_batch_size",
            "a smaller parallel.micro_batch_size or model.seq_length, "
            "parallel.activation_checkpointing: true, or more ranks (parallel.tensor)"};
  return {"parallel.micro_batch_size",
          "a smaller parallel.micro_batch_size or model.seq_length (the logits are micro x "
          "seq x model.vocab_size), or more ranks (parallel.tensor)"};
}

}  // namespace

const std::vector<const char*>& memory_term_names() {
  static const std::vector<const char*> names = {"weights",      "gradients",   "master_weights",
                                                 "adam_moments", "activations", "workspace"};
  return names;
}

void check_node_memory(const std::vector<RankMemory>& ranks, const std::string& source) {
  struct Node {
    int64_t need = 0, available = -1, count = 0;
    const RankMemory* largest = nullptr;
  };
  std::map<int64_t, Node> nodes;
  for (const RankMemory& r : ranks) {
    Node& n = nodes[r.node];
    n.need += r.need;
    ++n.count;
    if (r.available >= 0)
      n.available = n.available < 0 ? r.available : std::min(n.available, r.available);
    if (n.largest == nullptr || r.need > n.largest->need) n.largest = &r;
  }
  for (const auto& [id, n] : nodes) {
    if (n.available < 0 || n.need <= n.available) continue;
    const RankMemory& big = *n.largest;
    const auto& names = memory_term_names();
    const std::string term =
        big.largest_term >= 0 && big.largest_term < static_cast<int64_t>(names.size())
            ? names[static_cast<size_t>(big.largest_term)]
            : "workspace";
    const auto [key, fix] = term_fix(term);
    const std::string who =
        n.count == 1 ? fmt::format(
                           "this process needs {:.2f} GiB by the plan ({} bytes, most of it {} "
                           "{:.2f} GiB)",
                           gib(n.need), n.need, term, gib(big.largest_bytes))
                     : fmt::format(
                           "the {} ranks on node {} need {:.2f} GiB by the plan ({} bytes; the "
                           "largest, rank {}, {:.2f} GiB, most of it {} {:.2f} GiB)",
                           n.count, id, gib(n.need), n.need, big.rank, gib(big.need), term,
                           gib(big.largest_bytes));
    throw invalid_argument(fmt::format("not enough memory: {} but the node has {:.2f} GiB "
                                       "available ({}); allocating it would end in the kernel's "
                                       "OOM killer. Use {}; --dry-run prints the plan per rank",
                                       who, gib(n.available), source, fix),
                           key);
  }
}

void check_host_memory(const MemoryTerms& need, int64_t node, Communicator* world) {
  const HostMemory host = host_memory_available();
  const auto& names = memory_term_names();
  const std::string largest = need.largest();
  int64_t term = 0;
  for (size_t i = 0; i < names.size(); ++i)
    if (largest == names[i]) term = static_cast<int64_t>(i);
  const int64_t rank = world != nullptr ? world->rank() : 0;
  const int64_t size = world != nullptr ? world->size() : 1;
  // Sent as f64: the communicators reduce and gather floating point and int32; byte counts up to
  // 2^53 are exact.
  Tensor mine = Tensor::cpu({kFields}, DType::kF64);
  const double fields[kFields] = {
      static_cast<double>(rank),         static_cast<double>(node),
      static_cast<double>(need.total()), static_cast<double>(host.available),
      static_cast<double>(term),         static_cast<double>(need.largest_bytes())};
  std::memcpy(mine.data_as<double>(), fields, sizeof fields);
  Tensor all = Tensor::cpu({size * kFields}, DType::kF64);
  if (world != nullptr && size > 1) {
    world->all_gather(all, mine);
  } else {
    std::memcpy(all.data_as<double>(), fields, sizeof fields);
  }
  std::vector<RankMemory> ranks(static_cast<size_t>(size));
  const double* v = all.data_as<double>();
  for (int64_t r = 0; r < size; ++r) {
    const double* f = v + r * kFields;
    ranks[static_cast<size_t>(r)] = RankMemory{
        static_cast<int64_t>(f[0]), static_cast<int64_t>(f[1]), static_cast<int64_t>(f[2]),
        static_cast<int64_t>(f[3]), static_cast<int64_t>(f[4]), static_cast<int64_t>(f[5])};
  }
  check_node_memory(ranks, host.source);
}

}  // namespace mtnlg
