// ZeRO-1's partition of a parameter list over data-parallel ranks: every parameter, in registry
// order, is viewed as one flat vector of N elements, padded with zeros to a multiple of dp; rank r
// owns elements [r*S, (r+1)*S), S = padded / dp. The runs of that range inside each parameter are
// its segments. GradSync's reduce-scatter (parallel/grad_sync.h), the optimizer
// (optim/zero_optimizer.h) and offline checkpoint conversion (mtnlg-ckpt convert) share this rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mtnlg {

struct ZeroSegment {
  size_t param = 0;      // index in the list
  int64_t in_param = 0;  // first element, in the parameter's flat view
  int64_t in_part = 0;   // first element, in the partition
  int64_t length = 0;
};

struct ZeroPartition {
  int64_t numel = 0;           // N
  int64_t partition_size = 0;  // S
  int64_t begin = 0;           // r * S
  std::vector<ZeroSegment> segments;
};

// numels: the parameters' element counts in registry order.
ZeroPartition zero_partition(const std::vector<int64_t>& numels, int64_t dp, int64_t rank);

}  // namespace mtnlg
