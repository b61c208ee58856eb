// The plan of the CUDA backend's deterministic column sums (core/cuda/column_sum_cuda.cuh: bias
// and LayerNorm parameter gradients), and the scratch its partial sums take from the backend's
// workspace. Plain C++, no CUDA headers: the planner sizes the workspace with the same formula
// the kernels run (cmd/planner.cc, --dry-run's kernel scratch).
#pragma once

#include <algorithm>
#include <cstdint>

namespace mtnlg {

struct ColumnSumPlan {
  int64_t rows, cols, chunks, rows_per_chunk;
  int pack;  // columns one thread of the packed first pass sums (16 bytes of elements)
  // Elements of the accumulation type the partials buffer needs, per term.
  int64_t partial_elements() const { return chunks * cols; }
};

// Threads the first pass aims for: enough 16-byte loads in flight to keep any current GPU's
// memory busy, few enough row chunks that the partials stay a small fraction of the input
// (about 65536 x pack accumulators a term, 2 MiB for bf16 rows summed in fp32).
constexpr int64_t kColumnSumThreads = 65536;
// At most this many row chunks: the first pass's grid has them in y (at most 65535), and the
// second pass walks them; only narrow sums (a few packs of columns) over many rows reach it.
constexpr int64_t kMaxColumnChunks = 4096;

// The plan for rows x cols elements `pack` to 16 bytes; the same for the packed and the
// element-by-element path, so that each column's sum has one order.
inline ColumnSumPlan column_sum_plan(int64_t rows, int64_t cols, int pack) {
  ColumnSumPlan p{};
  p.rows = rows;
  p.cols = cols;
  p.pack = pack;
  const int64_t packs = std::max<int64_t>(1, (cols + pack - 1) / pack);
  p.chunks = std::clamp<int64_t>(kColumnSumThreads / packs, 1,
                                 std::clamp<int64_t>(rows, 1, kMaxColumnChunks));
  p.rows_per_chunk = std::max<int64_t>(1, (rows + p.chunks - 1) / p.chunks);
  p.chunks = std::max<int64_t>(1, (rows + p.rows_per_chunk - 1) / p.rows_per_chunk);
  return p;
}

// Workspace bytes of one column_sums call: `terms` sums (LayerNorm: 2) over rows x cols elements
// of `element_bytes`, accumulated in `acc_bytes`.
inline int64_t column_sum_scratch_bytes(int64_t rows, int64_t cols, int64_t element_bytes,
                                        int64_t acc_bytes, int terms) {
  if (rows == 0 || cols == 0) return 0;
  const int pack = static_cast<int>(16 / element_bytes);
  return terms * column_sum_plan(rows, cols, pack).partial_elements() * acc_bytes;
}

}  // namespace mtnlg
