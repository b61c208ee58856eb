// The backend a benchmark runs on, from its --device flag: the CPU backend, or GPU 0 when this
// build has the CUDA backend (otherwise kUnsupported naming the flag).
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"

namespace mtnlg::bench {

std::unique_ptr<Backend> make_bench_backend(const std::string& device, int threads);

}  // namespace mtnlg::bench
