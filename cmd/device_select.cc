#include "cmd/device_select.h"

#include <string>

#include "core/status.h"
#include "parallel/transport.h"

#ifdef MTNLG_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/cuda/cuda_backend.h"
#include "parallel/cuda/nccl_communicator.h"
#endif

namespace mtnlg {

bool cuda_built() {
#ifdef MTNLG_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int visible_cuda_devices() {
#ifdef MTNLG_HAVE_CUDA
  int count = 0;
  // No driver, no device, or a broken install all mean: no GPU to train on.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

Device planned_device(DeviceChoice choice) {
  return choice == DeviceChoice::kCpu ? Device::kCPU : Device::kCUDA;
}

DeviceResolution resolve_device(DeviceChoice choice, int64_t local_rank) {
  DeviceResolution r;
  if (choice == DeviceChoice::kCpu) {
    r.description = "cpu";
    return r;
  }
  const int visible = visible_cuda_devices();
  if (visible == 0) {
    if (choice == DeviceChoice::kAuto) {
      r.description = cuda_built() ? "cpu (no GPU visible)" : "cpu";
      return r;
    }
    throw unsupported(
        cuda_built()
            ? "device: cuda, but no CUDA GPU is visible to this process (check nvidia-smi, the "
              "driver and CUDA_VISIBLE_DEVICES); set device: cpu (or --device cpu) to train on "
              "the CPU"
            : "device: cuda, but this mtnlg-train was built without the CUDA backend; rebuild "
              "with CUDA (scripts/build.sh finds nvcc; cmake -DMTNLG_CUDA=ON) or set device: cpu",
        "device");
  }
  r.device = Device::kCUDA;
  r.index = static_cast<int>(local_rank % visible);
  r.description = "cuda:" + std::to_string(r.index) + " of " + std::to_string(visible) + " visible";
  return r;
}

DeviceChoice device_choice_named(const std::string& name) {
  if (name == "auto") return DeviceChoice::kAuto;
  if (name == "cpu") return DeviceChoice::kCpu;
  if (name == "cuda") return DeviceChoice::kCuda;
  throw invalid_argument("--device " + name + " is not one of auto, cpu, cuda", "--device");
}

std::unique_ptr<Backend> make_backend(const DeviceResolution& where, int threads,
                                      AttentionBackend attention) {
  if (where.device == Device::kCPU) return make_cpu_backend(threads);
#ifdef MTNLG_HAVE_CUDA
  return make_cuda_backend(where.index, attention);
#else
  (void)attention;  // a CPU-only build has no GPU kernels to choose
  throw unsupported("this build has no CUDA backend", "device");
#endif
}

void check_device_memory(const DeviceResolution& where, [[maybe_unused]] int64_t planned_bytes) {
  if (where.device != Device::kCUDA) return;
#ifdef MTNLG_HAVE_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(where.index) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // the backend's own allocation reports the failure with its reason
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (static_cast<double>(planned_bytes) > static_cast<double>(free_bytes)) {
    throw unsupported(
        "the plan needs " + std::to_string(static_cast<double>(planned_bytes) / gib) +
            " GiB on this rank but GPU " + std::to_string(where.index) + " has " +
            std::to_string(static_cast<double>(free_bytes) / gib) + " GiB free of " +
            std::to_string(static_cast<double>(total_bytes) / gib) +
            " GiB; lower parallel.micro_batch_size, turn on parallel.activation_checkpointing, "
            "or use more tensor/pipeline ranks (--dry-run prints the plan)",
        "parallel.micro_batch_size");
  }
#endif
}

ProcessGroups make_device_groups(const DeviceResolution& where, const Topology& topology,
                                 Store& store, std::chrono::milliseconds timeout,
                                 CpuTransport transport) {
  const TransportOptions options = TransportOptions::resolve(transport, timeout);
  if (where.device == Device::kCPU) return make_host_groups(topology, store, options);
#ifdef MTNLG_HAVE_CUDA
  return make_nccl_groups(topology, store, where.index, options);
#else
  throw unsupported("this build has no CUDA backend", "device");
#endif
}

}  // namespace mtnlg
