#include "bench/bench_backend.h"

#ifdef MTNLG_HAVE_CUDA
#include "core/cuda/cuda_backend.h"
#endif

namespace mtnlg::bench {

std::unique_ptr<Backend> make_bench_backend(const std::string& device, int threads) {
  if (device == "cpu") return make_cpu_backend(threads);
#ifdef MTNLG_HAVE_CUDA
  return make_cuda_backend(0);
#else
  throw unsupported("--device cuda: this build has no CUDA backend (cmake -DMTNLG_CUDA=ON)",
                    "--device");
#endif
}

}  // namespace mtnlg::bench
