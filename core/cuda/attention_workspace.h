// The scratch the CUDA attention kernels take from the backend's Workspace (the blocked kernels
// of core/cuda/attention_cuda.cu: one sequence's scores; the FA2-style ones: a float per row,
// their keep bits and stored dS; cuDNN's: an estimate), and what the planner reports for it
// (--dry-run's cuda_attention_scratch_bytes): one formula for both. Plain C++, no CUDA headers.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/attention_backend.h"
#include "core/env_choice.h"
#include "core/kernels/flash2_backward.h"
#include "core/kernels/flash2_forward.h"

namespace mtnlg {

// One sequence's pieces. Forward: the scores in the accumulation type, the probabilities in the
// model dtype (not written when dropout is on) and the dropped probabilities when it is.
// Backward: the recomputed scores and their gradient dP (dO V^T) in the accumulation type, the
// operand of dV's product (the dropped probabilities, or the probabilities without dropout) and
// the softmax gradient in the model dtype.
struct AttentionWorkspace {
  int64_t elements;  // local heads x s x s
  int64_t acc_bytes, value_bytes;
  bool dropout;

  int64_t probs_offset() const { return elements * acc_bytes; }
  int64_t dropped_offset() const { return probs_offset() + elements * value_bytes; }
  int64_t forward_bytes() const {
    return dropped_offset() + (dropout ? elements * value_bytes : 0);
  }
  int64_t score_grad_offset() const { return elements * acc_bytes; }
  int64_t backward_probs_offset() const { return 2 * elements * acc_bytes; }
  int64_t softmax_grad_offset() const { return backward_probs_offset() + elements * value_bytes; }
  int64_t backward_bytes() const { return softmax_grad_offset() + elements * value_bytes; }
};

inline AttentionWorkspace attention_workspace(int64_t local_heads, int64_t s, int64_t acc_bytes,
                                              int64_t value_bytes, bool dropout) {
  return {local_heads * s * s, acc_bytes, value_bytes, dropout};
}

// Whether the CUDA backend runs attention through the FA2-style kernels for this value size and
// head size: bf16/fp16 at head sizes 64 and 128, and at 160 when MTNLG_CUDA_ATTENTION names them
// (`named`; kernels::flash2::head_dim_measured says why). Their shared memory fits every GPU they
// run on (105 KiB a block at most, head size 160).
inline bool flash2_attention_planned(int64_t value_bytes, int64_t head_dim, bool named) {
  return value_bytes == 2 && kernels::flash2::head_dim_supported(head_dim) &&
         (named || kernels::flash2::head_dim_measured(head_dim));
}

// Whether cuDNN's fused attention takes a call: bf16/fp16, a head size that is a multiple of 8 up
// to 256 (its fused engines on Ampere and Hopper).
inline bool cudnn_attention_planned(int64_t value_bytes, int64_t head_dim) {
  return value_bytes == 2 && head_dim > 0 && head_dim % 8 == 0 && head_dim <= 256;
}

// MTNLG_CUDA_CUDNN_DQ: cuDNN's backward computes dQ by a GEMM over dS kept in its workspace
// (`deterministic`, the default: reruns bit-identical) or accumulates it with atomics into a
// float buffer (`accumulate`).
inline bool cudnn_attention_deterministic() {
  return env_choice("MTNLG_CUDA_CUDNN_DQ", "deterministic", "accumulate");
}

// Attention's kernels on the GPU, MTNLG_CUDA_ATTENTION: `flash2` (core/kernels/flash2_forward.h
// and flash2_backward.h: FA2-style, scores and accumulators in registers, nothing of size [s, s]
// but the backward's stored dS) or `blocked` (cuBLAS products over causal row blocks, a
// [heads, s, s] workspace); or one pass each: `flash2-fwd` (flash2's forward, the blocked
// backward) and `flash2-bwd` (the blocked forward, flash2's backward). (`flash`, the first
// FA-style kernels, wmma tiles through shared memory, was removed on 2026-11-27: the FA2-style
// ones replaced them; naming it is now an error listing these.) Any backward
// continues from any forward: forward's contract is out and each row's log-sum-exp, and every
// kernel drops the same elements (the CPU's index), so the best pass of each family can be
// combined. The FA2-style ones only where they apply (bf16/fp16, their head sizes), the blocked
// ones elsewhere (fp32, f64, other head sizes). The CUDA backend and the planner both ask here, so
// a value other than these is an error naming the variable in --dry-run as in training. `cudnn`
// (the default): cuDNN's fused attention (core/cuda/cudnn_attention.h) in both passes; its dropout
// masks are its own, so its forward pairs only with its backward. bf16/fp16 at head sizes that are
// multiples of 8 up to 256. By default, where it does not apply (or cuDNN is not on the machine, or
// refuses a shape: the backend then says so once) the FA2-style kernels where they apply and the
// blocked ones elsewhere; named, the blocked ones. It is the default since the kit measured it
// fastest on an H200 (2026-11-27, docs/gpu.md): the 1.3B recipe end to end at 55.0% MFU
// against 44.9% with flash2 (the default before) and 37.4% blocked; attention alone 2.1-2.9x
// flash2's speed on the 1.3B, 530B-tp8 and GPT-2 shapes. flash2 stays the kernels that draw the
// CPU's dropout masks (the kit's CPU comparisons name it).
enum class AttentionKernels { kBlocked = 0, kFlash2 = 2, kCudnn = 3 };

// How the FA2-style backward gets dS for dq, MTNLG_CUDA_FLASH2_DQ: `stored` (the dk/dv pass
// stores dS^T, 2 bytes an element of [b, heads, s, s] in the workspace, and dq reads it back; five
// products a tile), `recompute` (the dq pass recomputes S, dP and the softmax itself: seven
// products, no [s, s] scratch), or `auto` (the default): stored while that dS^T of one call takes
// at most kFlash2AutoStoredDsBytes, recomputed beyond, since it grows with the micro-batch and s^2
// (512 MiB for the 1.3B recipe's 4 x 2048 x 16 heads; 8 GiB at 4 x 8192): the faster way where
// memory allows, and never gigabytes of scratch nobody asked for. The rule reads the call's shape
// only, so a run chooses the same way every time (reruns stay bit-identical).
enum class Flash2Dq { kAuto = 0, kStored = 1, kRecompute = 2 };
constexpr int64_t kFlash2AutoStoredDsBytes = int64_t{1} << 30;

// The kernel family of each pass, and the FA2-style backward's way to dS for dq.
struct AttentionChoice {
  AttentionKernels forward, backward;
  Flash2Dq flash2_dq = Flash2Dq::kAuto;
  // MTNLG_CUDA_ATTENTION named a family with FA2-style kernels (flash2, flash2-fwd, flash2-bwd)
  // rather than leaving the default: they then also take the head sizes not yet measured.
  bool flash2_named = false;
  // MTNLG_CUDA_ATTENTION=cudnn was named: no fallback where cuDNN does not apply or is missing
  // (the blocked kernels where it does not apply; an error where it is missing).
  bool cudnn_named = false;
  AttentionChoice(AttentionKernels both) : forward(both), backward(both) {}  // NOLINT: one family
  AttentionChoice(AttentionKernels f, AttentionKernels b, Flash2Dq dq = Flash2Dq::kAuto,
                  bool named = false)
      : forward(f), backward(b), flash2_dq(dq), flash2_named(named) {}
  bool operator==(const AttentionChoice&) const = default;
  // Whether the FA2-style backward of a call over [b, heads, s] stores dS^T (the CUDA backend
  // and the planner both ask here).
  bool flash2_stores_ds(int64_t b, int64_t heads, int64_t s) const {
    if (flash2_dq != Flash2Dq::kAuto) return flash2_dq == Flash2Dq::kStored;
    return kernels::flash2::ds_bytes(b, heads, s) <= kFlash2AutoStoredDsBytes;
  }
};

// The recipe's model.attention_backend, unless MTNLG_CUDA_ATTENTION is set (it then wins: the
// benchmarks' and the kit's switch, with the one-pass families flash2-fwd and flash2-bwd).
inline AttentionChoice attention_choice(AttentionBackend recipe = AttentionBackend::kAuto) {
  using K = AttentionKernels;
  const auto stored =
      static_cast<Flash2Dq>(env_select("MTNLG_CUDA_FLASH2_DQ", {"auto", "stored", "recompute"}));
  // The first value is the default (unset or empty).
  size_t which = env_select("MTNLG_CUDA_ATTENTION",
                            {"cudnn", "flash2", "blocked", "flash2-fwd", "flash2-bwd"});
  const char* set = std::getenv("MTNLG_CUDA_ATTENTION");
  bool named = set != nullptr && *set != '\0';
  if (!named && recipe != AttentionBackend::kAuto) {
    named = true;
    which = recipe == AttentionBackend::kFlash2 ? 1 : recipe == AttentionBackend::kBlocked ? 2 : 0;
  }
  switch (which) {
    case 1:
      return {K::kFlash2, K::kFlash2, stored, true};
    case 2:
      return {K::kBlocked, K::kBlocked, stored};
    case 3:
      return {K::kFlash2, K::kBlocked, stored, true};
    case 4:
      return {K::kBlocked, K::kFlash2, stored, true};
    default: {
      AttentionChoice c{K::kCudnn, K::kCudnn, stored};
      c.cudnn_named = named;
      return c;
    }
  }
}
// Every switch the CUDA backend reads from the environment, read in one place: the backend takes
// them from here when it is made, and the planner reads them too (plan_memory), so a
// misspelling of any of them is an error naming the variable in --dry-run as in training, not
// only the switches that change the plan. MTNLG_CUDA_FLASH2_ROWS: 64
// (the default) or 128 query rows a FA2-style forward block; MTNLG_CUDA_EPILOGUES: a linear
// layer's bias and tanh GeLU in cuBLASLt's epilogue (`on`, the default) or separate kernels.
struct CudaSwitches {
  AttentionChoice attention{AttentionKernels::kFlash2};
  bool flash2_wide_rows = false, epilogues = true;
  bool cudnn_deterministic = true;  // MTNLG_CUDA_CUDNN_DQ
};
inline CudaSwitches cuda_switches(AttentionBackend attention = AttentionBackend::kAuto) {
  CudaSwitches c;
  c.attention = attention_choice(attention);
  c.flash2_wide_rows = !env_choice("MTNLG_CUDA_FLASH2_ROWS", "64", "128");
  c.epilogues = env_choice("MTNLG_CUDA_EPILOGUES", "on", "off");
  c.cudnn_deterministic = cudnn_attention_deterministic();
  return c;
}

// The kernels each attention pass runs for a call over [micro_batch, local_heads, s] at this
// head size and value size, in words for the log and --dry-run: "flash2 (dq from stored dS)",
// "blocked", "flash2 forward, blocked backward", ... (the rule cuda_attention_scratch plans by).
// The family a pass chosen as `k` runs at this value size and head size: k where it applies,
// else the blocked kernels (the rule of the planner's scratch and of its description).
inline AttentionKernels attention_kernels_run(AttentionKernels k, const AttentionChoice& c,
                                              int64_t value_bytes, int64_t head_dim) {
  if (k == AttentionKernels::kFlash2 &&
      flash2_attention_planned(value_bytes, head_dim, c.flash2_named))
    return AttentionKernels::kFlash2;
  if (k == AttentionKernels::kCudnn) {
    if (cudnn_attention_planned(value_bytes, head_dim)) return AttentionKernels::kCudnn;
    // The default falls back to flash2 where it applies (its measured head sizes).
    if (!c.cudnn_named && flash2_attention_planned(value_bytes, head_dim, false))
      return AttentionKernels::kFlash2;
  }
  return AttentionKernels::kBlocked;
}

inline std::string attention_kernels_description(AttentionChoice c, int64_t micro_batch,
                                                 int64_t local_heads, int64_t s, int64_t head_dim,
                                                 int64_t value_bytes) {
  const auto runs = [&](AttentionKernels k) {
    return attention_kernels_run(k, c, value_bytes, head_dim);
  };
  const auto name = [](AttentionKernels k) {
    return k == AttentionKernels::kFlash2  ? std::string("flash2")
           : k == AttentionKernels::kCudnn ? std::string("cudnn")
                                           : std::string("blocked");
  };
  const AttentionKernels f = runs(c.forward), b = runs(c.backward);
  std::string out = f == b ? name(f) : name(f) + " forward, " + name(b) + " backward";
  if (b == AttentionKernels::kFlash2)
    out += c.flash2_stores_ds(micro_batch, local_heads, s) ? " (dq from stored dS)"
                                                           : " (dq recomputes dS)";
  return out;
}

// The largest scratch attention takes from the CUDA backend's workspace in one call, the larger
// of its passes': the FA2-style forward takes none; its backward (chosen, and it applies) its delta
// [b, local heads, s] in fp32, with dropout its keep bits, and with dS stored (flash2_stores_ds)
// dS^T (2 bytes an element of [b, local heads, s, s rounded up to 8]); the blocked
// kernels one sequence's scores and probabilities, forward or backward.
inline int64_t cuda_attention_scratch(int64_t micro_batch, int64_t local_heads, int64_t s,
                                      int64_t head_dim, int64_t value_bytes, bool dropout,
                                      AttentionChoice kernels) {
  const AttentionWorkspace blocked = attention_workspace(local_heads, s, 4, value_bytes, dropout);
  const AttentionKernels fwd =
      attention_kernels_run(kernels.forward, kernels, value_bytes, head_dim);
  const AttentionKernels bwd =
      attention_kernels_run(kernels.backward, kernels, value_bytes, head_dim);
  const int64_t forward = fwd != AttentionKernels::kBlocked ? 0 : blocked.forward_bytes();
  int64_t backward = blocked.backward_bytes();
  if (bwd == AttentionKernels::kCudnn) {
    // An estimate (cuDNN says its workspace only once a plan is made on a GPU): rowsum(dO O) in
    // fp32, and for the deterministic dQ its dS in 2 bytes an element of [b, heads, s, s] padded
    // to 64, else the float dQ accumulator.
    const int64_t sp = (s + 63) / 64 * 64;
    backward = micro_batch * local_heads * s * 4 +
               (cudnn_attention_deterministic() ? micro_batch * local_heads * sp * sp * 2
                                                : micro_batch * local_heads * s * head_dim * 4);
  } else if (bwd != AttentionKernels::kBlocked)
    backward = kernels::flash2::backward_scratch_bytes(
        micro_batch, local_heads, s, dropout,
        kernels.flash2_stores_ds(micro_batch, local_heads, s));
  return forward > backward ? forward : backward;
}

}  // namespace mtnlg
