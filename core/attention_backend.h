// The GPU's attention kernels as a recipe names them (model.attention_backend), shared by the
// recipe and the CUDA backend's switches (core/cuda/attention_workspace.h).
#pragma once

namespace mtnlg {

// The GPU's attention kernels (Megatron-LM's --attention-backend): auto = cuDNN's fused
// attention where it applies, the FA2-style kernels where they apply, the blocked cuBLAS ones
// elsewhere; cudnn = cuDNN's only (the blocked ones where it does not apply); flash2 = the
// FA2-style ones (also at head sizes not yet measured); blocked = the blocked ones. A CPU run's
// attention is its own whatever it says. MTNLG_CUDA_ATTENTION, when set, overrides it.
enum class AttentionBackend { kAuto, kCudnn, kFlash2, kBlocked };

}  // namespace mtnlg
