#include "bench/bench_backend.h"

#include <algorithm>
#include <chrono>
#include <vector>

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

double median_call_seconds(Backend& be, double min_seconds, const std::function<void()>& call) {
  using Clock = std::chrono::steady_clock;
  call();
  be.synchronize();
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
    const auto t0 = Clock::now();
    call();
    be.synchronize();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace mtnlg::bench
