#include "core/device_peak.h"

#include <algorithm>
#include <cctype>

namespace mtnlg {
namespace {

// NVIDIA's datasheets, dense (the sparsity figures are twice these).
const DeviceSpec kH100Sxm{"H100 SXM", 80, 989, 1979, 494};
const DeviceSpec kH100Pcie{"H100 PCIe", 80, 756, 1513, 378};
const DeviceSpec kH100Nvl{"H100 NVL", 94, 835, 1671, 418};
const DeviceSpec kH200Sxm{"H200 SXM", 141, 989, 1979, 494};
const DeviceSpec kH200Nvl{"H200 NVL", 141, 835, 1671, 418};
const DeviceSpec kA100{"A100", 80, 312, 0, 156};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

std::optional<DeviceSpec> device_spec_from_name(const std::string& device_name) {
  const std::string n = upper(device_name);
  const bool pcie = n.find("PCIE") != std::string::npos;
  const bool nvl = n.find("NVL") != std::string::npos;
  if (n.find("H100") != std::string::npos) return pcie ? kH100Pcie : nvl ? kH100Nvl : kH100Sxm;
  if (n.find("H200") != std::string::npos) return nvl ? kH200Nvl : kH200Sxm;
  if (n.find("A100") != std::string::npos) return kA100;
  return std::nullopt;
}

std::optional<DeviceSpec> device_spec_from_key(const std::string& key) {
  if (key == "a100") return kA100;
  if (key == "h100") return kH100Sxm;
  if (key == "h200") return kH200Sxm;
  return std::nullopt;
}

}  // namespace mtnlg
