// The scratch the CUDA attention kernels take from the backend's Workspace for one sequence
// (core/cuda/attention_cuda.cu), and what the planner reports for it (--dry-run's
// cuda_attention_scratch_bytes): one formula for both. Plain C++, no CUDA headers.
#pragma once

#include <cstdint>

namespace mtnlg {

// Scores (forward) or their gradient (backward) in the accumulation type, then for backward the
// softmax gradient in the model dtype, then the dropped probabilities when dropout is on.
// Offsets of the pieces are these sizes in order.
struct AttentionWorkspace {
  int64_t elements;  // local heads x s x s
  int64_t acc_bytes, value_bytes;
  bool dropout;

  int64_t forward_bytes() const { return elements * (acc_bytes + (dropout ? value_bytes : 0)); }
  int64_t backward_bytes() const {
    return elements * (acc_bytes + value_bytes + (dropout ? value_bytes : 0));
  }
};

inline AttentionWorkspace attention_workspace(int64_t local_heads, int64_t s, int64_t acc_bytes,
                                              int64_t value_bytes, bool dropout) {
  return {local_heads * s * s, acc_bytes, value_bytes, dropout};
}

}  // namespace mtnlg
