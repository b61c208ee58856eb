// The dense peak TFLOP/s NVIDIA's datasheets give for a GPU, by precision: the basis on which the
// field states MFU (Megatron-LM's tables, torchtitan, llm.c): model FLOPs per second over the
// datasheet's dense (no sparsity) tensor-core peak of the precision the GEMMs run in.
#pragma once

#include <optional>
#include <string>

namespace mtnlg {

// What the GEMMs of a run execute in, for the peak that applies.
enum class PeakPrecision { kBf16, kFp8, kTf32 };

struct DeviceSpec {
  std::string name;        // "H100 SXM"
  double memory_gb = 0;    // as sold (80, 141)
  double bf16_tflops = 0;  // dense bf16 / fp16
  double fp8_tflops = 0;   // dense fp8; 0 where the GPU has none (A100)
  double tf32_tflops = 0;  // dense TF32, the fp32 recipes' tensor-core rate
  double peak(PeakPrecision p) const {
    return p == PeakPrecision::kFp8    ? fp8_tflops
           : p == PeakPrecision::kTf32 ? tf32_tflops
                                       : bf16_tflops;
  }
};

// The part a device's name says it is (CUDA's device name, or a backend name holding it, e.g.
// "cuda:0 (NVIDIA H100 80GB HBM3)"): H100 SXM (989 bf16, 1979 fp8, 494 TF32), H100 PCIe (756,
// 1513, 378), H100 NVL (835, 1671, 418), H200 (SXM: as the H100 SXM; NVL: as the H100 NVL),
// A100 (312, none, 156). nullopt for anything else (a CPU, another GPU): no MFU is stated then.
std::optional<DeviceSpec> device_spec_from_name(const std::string& device_name);

// The same parts by the short names --dry-run's --gpu takes: a100, h100, h200 (SXM parts).
std::optional<DeviceSpec> device_spec_from_key(const std::string& key);

}  // namespace mtnlg
