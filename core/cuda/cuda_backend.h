// The CUDA backend: core/backend.h's Backend on one GPU.
//
// Owns one CUDA stream and one cuBLAS handle on that stream; every kernel, copy and GEMM is
// enqueued there in call order, so results are ordered without explicit syncs. Calls that hand
// a value or host memory back (sum_squares, device-to-host copy) synchronize the stream.
// Tensors it allocates own their device memory (cudaFree in the Storage deleter); their bytes
// are counted in live_bytes() / peak_bytes() until then.
// Thread safety: as every Backend, one thread at a time, and that thread must have the
// backend's device current (the constructor makes it current on the constructing thread).
//
// Every Backend operation, in f32, f64, bf16 and f16 (AdamW in f32/f64: a narrow model updates
// its fp32 masters), with the CPU backend's dtype rules: bf16/fp16 values, fp32 main gradients
// and LayerNorm statistics. Token and target ids are checked on the device (one read back).
// Launchers' temporaries live in one growing Workspace (not counted in live_bytes(); its blocks
// come from the same caching allocator, so they count in peak_reserved_bytes()).
#pragma once

#include <memory>

#include "core/attention_backend.h"
#include "core/backend.h"

namespace mtnlg {

// The backend for CUDA device `device` (an index into the visible devices), its attention
// kernels as `attention` says (the recipe's model.attention_backend; MTNLG_CUDA_ATTENTION wins).
// Throws Code::kUnsupported when there is no usable GPU and kInvalidArgument for a bad index.
std::unique_ptr<Backend> make_cuda_backend(int device,
                                           AttentionBackend attention = AttentionBackend::kAuto);

}  // namespace mtnlg
