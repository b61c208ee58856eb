// The trainer's check, before it allocates the model, that every node has the memory its ranks
// will take by the plan (cmd/planner.h: on the CPU backend the plan equals the measured peak to
// the byte). Without it a recipe too large for the machine is not refused: with overcommit the
// allocation succeeds and the kernel SIGKILLs the process once the pages are touched, minutes
// later and without a message (core/host_memory.h).
#pragma once

#include <cstdint>
#include <vector>

#include "cmd/planner.h"

namespace mtnlg {

class Communicator;

// One rank's figures, as every rank sees them after the all-gather.
struct RankMemory {
  int64_t rank = 0;
  int64_t node = 0;
  int64_t need = 0;          // bytes: the plan's total for its stage
  int64_t available = -1;    // bytes its node has left, as this rank measured it; -1 unknown
  int64_t largest_term = 0;  // index into memory_term_names()
  int64_t largest_bytes = 0;
};

// "weights", "gradients", "master_weights", "adam_moments", "activations", "workspace": the
// MemoryTerms fields, in that order.
const std::vector<const char*>& memory_term_names();

// Throws invalid_argument (exit 2) when the ranks of some node together need more than that node
// has (the smallest figure its ranks measured): names the node, the bytes needed and available,
// the largest term of its largest rank, and the recipe keys that shrink that term.
void check_node_memory(const std::vector<RankMemory>& ranks, const std::string& source);

// This rank's plan and measured memory, gathered over `world` (null: one process), then
// check_node_memory on every rank alike, so that all ranks fail together with one message.
void check_host_memory(const MemoryTerms& need, int64_t node, Communicator* world);

}  // namespace mtnlg
