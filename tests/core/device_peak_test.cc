// The datasheet peaks MFU is stated against (core/device_peak.h): a device's name as CUDA gives it
// (or inside a backend's name) picks its part; other devices have none.
#include "core/device_peak.h"

#include <catch2/catch.hpp>

namespace mtnlg {
namespace {

TEST_CASE("datasheet peaks by CUDA's device name - SXM, PCIe and NVL parts apart") {
  struct Want {
    const char* name;
    const char* part;
    double bf16, fp8, tf32;
  };
  for (const Want& w : {Want{"NVIDIA H100 80GB HBM3", "H100 SXM", 989, 1979, 494},
                        Want{"cuda:0 (NVIDIA H100 80GB HBM3)", "H100 SXM", 989, 1979, 494},
                        Want{"NVIDIA H100 PCIe", "H100 PCIe", 756, 1513, 378},
                        Want{"NVIDIA H100 NVL", "H100 NVL", 835, 1671, 418},
                        Want{"NVIDIA H200", "H200 SXM", 989, 1979, 494},
                        Want{"NVIDIA H200 NVL", "H200 NVL", 835, 1671, 418},
                        Want{"NVIDIA A100-SXM4-80GB", "A100", 312, 0, 156}}) {
    INFO(w.name);
    const auto spec = device_spec_from_name(w.name);
    REQUIRE(spec.has_value());
    CHECK(spec->name == w.part);
    CHECK(spec->peak(PeakPrecision::kBf16) == w.bf16);
    CHECK(spec->peak(PeakPrecision::kFp8) == w.fp8);
    CHECK(spec->peak(PeakPrecision::kTf32) == w.tf32);
  }
  for (const char* other :
       {"cpu (2 threads)", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB", ""})
    CHECK_FALSE(device_spec_from_name(other).has_value());
}

TEST_CASE("datasheet peaks by --dry-run's --gpu keys") {
  CHECK(device_spec_from_key("h100")->bf16_tflops == 989);
  CHECK(device_spec_from_key("h200")->memory_gb == 141);
  CHECK(device_spec_from_key("a100")->tf32_tflops == 156);
  CHECK_FALSE(device_spec_from_key("H100").has_value());
  CHECK_FALSE(device_spec_from_key("v100").has_value());
}

}  // namespace
}  // namespace mtnlg
