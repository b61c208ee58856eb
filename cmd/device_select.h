// Where a rank trains: the recipe's `device` (auto | cpu | cuda, or --device) resolved against
// this build and this machine, and the Backend for it. The one place a backend is chosen.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/config/recipe.h"
#include "parallel/communicator.h"
#include "parallel/store.h"
#include "parallel/topology.h"

namespace mtnlg {

struct DeviceResolution {
  Device device = Device::kCPU;
  int index = 0;            // the CUDA device (local_rank % visible GPUs); 0 on the CPU
  std::string description;  // for the log: "cpu" or "cuda:1 of 8 visible"
};

// True when this binary was built with the CUDA backend (-DMTNLG_CUDA=ON).
bool cuda_built();
// GPUs the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies); 0 without the CUDA backend, a
// driver or a GPU.
int visible_cuda_devices();

// A command line's --device (auto, cpu or cuda; the flag's own check refuses others).
DeviceChoice device_choice_named(const std::string& name);

// auto: cuda when cuda_built() and a GPU is visible, else cpu. cuda without either is
// Code::kUnsupported (exit 3) naming the key and the fix. Rank `local_rank` on its node takes
// GPU local_rank % visible.
DeviceResolution resolve_device(DeviceChoice choice, int64_t local_rank);

// The device --dry-run plans for: the CPU when the recipe (or --device) says cpu, else a GPU
// (the plan is checked against a GPU's memory, on any machine, as before a cluster run).
Device planned_device(DeviceChoice choice);

// The Backend for `where`: the CPU backend with `threads` threads, or the CUDA backend with
// `attention`'s kernels (the recipe's model.attention_backend; the CPU's attention is its own).
std::unique_ptr<Backend> make_backend(const DeviceResolution& where, int threads,
                                      AttentionBackend attention = AttentionBackend::kAuto);

// Throws kUnsupported (exit 3) when `planned_bytes` (the planner's peak for this rank) exceeds
// the GPU's free memory, naming both and the recipe keys that lower it. No-op on the CPU.
void check_device_memory(const DeviceResolution& where, int64_t planned_bytes);

// This rank's process groups for a job of several ranks training on `where`, through the
// transport factory (parallel/transport.h, which reads the environment's switches): NCCL on GPU
// where.index for a CUDA rank (the checkpoint group a CPU group), CPU groups over `transport`
// (parallel.transport) on the CPU. Collective: every rank calls it once, with the same kind of
// device (a job mixing CPU and GPU ranks is refused by the first group).
ProcessGroups make_device_groups(const DeviceResolution& where, const Topology& topology,
                                 Store& store, std::chrono::milliseconds timeout,
                                 CpuTransport transport = CpuTransport::kAuto);

}  // namespace mtnlg
