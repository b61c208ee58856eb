// What a rank's process holds on its GPU beyond the backend's tensors: the BLAS workspace (exact:
// the CUDA backend allocates it from these figures), the CUDA context and NCCL's buffers
// (estimates, for the planner: neither is ours to size). Host-only, so that the planner, which
// builds without CUDA, and the backend read the same figures. The trainer measures the real
// total at run time (its "memory ... outside the allocator" log line).
#pragma once

#include <cstdint>

namespace mtnlg {

// One workspace for cuBLAS and cuBLASLt: both run on the backend's one stream, one call at a
// time, so they share it (cublasSetWorkspace and the cuBLASLt calls' workspace argument). From
// the caching allocator, so it counts in what the allocator reserves. cuBLAS's recommended
// sizes: 32 MiB on Hopper (compute capability 9.0) and later, 4 MiB before.
constexpr int64_t blas_workspace_bytes(int compute_major) {
  return compute_major >= 9 ? int64_t{32} << 20 : int64_t{4} << 20;
}
// The planner does not know the GPU: the larger.
constexpr int64_t kBlasWorkspacePlanBytes = blas_workspace_bytes(9);

// The CUDA backend's own fixed scratch, held from its construction (exact): sum_squares' partial
// sums in double (the last slot its result), the deferred id checks' 64-bit words
// (core/id_checks.h: kIdCheckWords), the random streams' base (Backend::set_rng_stream_base, 8
// bytes), and one word: abs_max's and fp8_cast's largest magnitude (each synchronizes before
// returning). Counted with attention's in the plan's kernel scratch;
// not a tensor (Backend::live_bytes).
constexpr int kSumSquaresScratch = 1024;
constexpr int kIdCheckWords = 64;  // DeferredIdChecks::kSlots (asserted where both are seen)
constexpr int64_t kCudaBackendScratchBytes =
    kSumSquaresScratch * int64_t{8} + kIdCheckWords * int64_t{8} + 8 + 4;

// Estimate: the CUDA context with the kernels it has loaded (the driver's per-context state, the
// code of this binary's kernels and of the cuBLAS kernels used, loaded lazily since CUDA 12.2).
// Measured on an H200 (driver 580, CUDA 13.0, one rank of the 1.3B recipe): 600 MiB outside the
// allocator; the estimate rounds that up.
constexpr int64_t kCudaContextEstimateBytes = int64_t{640} << 20;

// Estimate per NCCL communicator of two or more ranks: per channel and connection, the receive
// buffers of NCCL's three protocols (Simple: NCCL_BUFFSIZE, 4 MiB by default; LL128 about
// 4.7 MiB; LL 0.5 MiB), for up to 32 channels (NVLink on an H100). NVLS (NVSwitch) and CollNet
// buffers are not included: NCCL_NVLS_ENABLE=0 turns the former off.
constexpr int64_t kNcclChannelBytesEstimate = (int64_t{4096} + 4800 + 512) << 10;
constexpr int64_t kNcclChannelsEstimate = 32;
constexpr int64_t kNcclCommunicatorEstimateBytes =
    kNcclChannelBytesEstimate * kNcclChannelsEstimate;

}  // namespace mtnlg
