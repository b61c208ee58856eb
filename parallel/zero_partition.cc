#include "parallel/zero_partition.h"

#include <algorithm>

namespace mtnlg {

ZeroPartition zero_partition(const std::vector<int64_t>& numels, int64_t dp, int64_t rank) {
  ZeroPartition p;
  for (const int64_t n : numels) p.numel += n;
  const int64_t padded = (p.numel + dp - 1) / dp * dp;
  p.partition_size = padded / dp;
  p.begin = rank * p.partition_size;
  const int64_t end = p.begin + p.partition_size;
  // The runs of [begin, end) inside each parameter; padding past N belongs to none.
  int64_t offset = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t lo = std::max(offset, p.begin), hi = std::min(offset + numels[i], end);
    if (lo < hi) p.segments.push_back({i, lo - offset, lo - p.begin, hi - lo});
    offset += numels[i];
  }
  return p;
}

}  // namespace mtnlg
