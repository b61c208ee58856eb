// The backend a benchmark runs on, from its --device flag: the CPU backend, or GPU 0 when this
// build has the CUDA backend (otherwise kUnsupported naming the flag).
#pragma once

#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/logging.h"
#include "core/status.h"

namespace mtnlg::bench {

std::unique_ptr<Backend> make_bench_backend(const std::string& device, int threads);

// The median seconds of one call(), each synchronized, over as many calls as fit in
// min_seconds (at least 3), after one untimed call.
double median_call_seconds(Backend& be, double min_seconds, const std::function<void()>& call);

// A benchmark's main after its flags are parsed: body()'s exit status, or what it throws as
// the benchmarks' exit statuses (2 for an invalid argument, 1 otherwise), the message on stderr
// after the program's name.
template <typename F>
int bench_main(const char* name, F&& body) {
  try {
    // Logs (the backend's, cuDNN's) go to stderr: stdout holds the results (--json lines).
    init_logging_to_stderr("info");
    return body();
  } catch (const Error& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return e.code() == Code::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace mtnlg::bench
