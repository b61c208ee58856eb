// bf16 causal self-attention with bf16 products (attention_bf16.cc); shapes and semantics are
// those of Backend::attention_forward/backward (core/backend.h), which CpuBackend has checked.
#pragma once

#include <cstdint>

#include "core/cpu/matmul_bf16.h"
#include "core/kernels/bf16_math.h"
#include "core/rng.h"

namespace mtnlg::cpu {

// Scratch (staged q, k, v, dout, fp32 accumulators, one row block's scores) is kept under this
// many bytes by taking (batch, head) problems in chunks, one at least; not in the memory plan,
// as the fp32 path's per-thread scratch is not.
inline constexpr int64_t kAttentionScratchBytes = int64_t{64} << 20;

// Where oneDNN has no bf16 matmul, kAuto stages the operands widened to fp32 and takes a problem
// a thread; kBatched keeps the batched bf16 staging, each product widened by MatmulBf16's
// fallback (the older path, for tests: both give the same bits).
enum class AttentionBf16Path { kAuto, kBatched };

// out: [b, s, heads*hd], stats: [b, heads, s] (each row's log-sum-exp), qkv: [b, s, heads*3*hd]
void attention_forward_bf16(MatmulBf16& mm, Bf16* out, float* stats, const Bf16* qkv, int64_t b,
                            int64_t s, int64_t heads, int64_t hd, float dropout_p, RngStream rng,
                            int64_t scratch_bytes = kAttentionScratchBytes,
                            AttentionBf16Path path = AttentionBf16Path::kAuto);
// dqkv: [b, s, heads*3*hd] (overwritten), dout: [b, s, heads*hd]
void attention_backward_bf16(MatmulBf16& mm, Bf16* dqkv, const Bf16* dout, const Bf16* qkv,
                             const float* stats, int64_t b, int64_t s, int64_t heads, int64_t hd,
                             float dropout_p, RngStream rng,
                             int64_t scratch_bytes = kAttentionScratchBytes,
                             AttentionBf16Path path = AttentionBf16Path::kAuto);

}  // namespace mtnlg::cpu
