// The scratch the CUDA attention kernels take from the backend's Workspace for one sequence
// (core/cuda/attention_cuda.cu), and what the planner reports for it (--dry-run's
// cuda_attention_scratch_bytes): one formula for both. Plain C++, no CUDA headers.
#pragma once

#include <cstdint>

namespace mtnlg {

// One sequence's pieces, in order: the scores in the accumulation type (backward: the scores,
// then the gradient of the dropped probabilities over them), the probabilities in the model
// dtype, the dropped probabilities when dropout is on, and for backward the softmax gradient in
// the model dtype.
struct AttentionWorkspace {
  int64_t elements;  // local heads x s x s
  int64_t acc_bytes, value_bytes;
  bool dropout;

  int64_t probs_offset() const { return elements * acc_bytes; }
  int64_t dropped_offset() const { return probs_offset() + elements * value_bytes; }
  int64_t softmax_grad_offset() const {
    return dropped_offset() + (dropout ? elements * value_bytes : 0);
  }
  int64_t forward_bytes() const { return softmax_grad_offset(); }
  int64_t backward_bytes() const { return softmax_grad_offset() + elements * value_bytes; }
};

inline AttentionWorkspace attention_workspace(int64_t local_heads, int64_t s, int64_t acc_bytes,
                                              int64_t value_bytes, bool dropout) {
  return {local_heads * s * s, acc_bytes, value_bytes, dropout};
}

}  // namespace mtnlg
