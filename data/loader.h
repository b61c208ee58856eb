// Loader: prepares the micro-batches of token ids a data-parallel rank trains on, in a prefetch
// thread, while the model runs.
//
// The position in the data stream is the number of consumed samples, as in Megatron-LM's
// MegatronPretrainingSampler: the iteration that starts at `consumed` covers samples
// [consumed, consumed + G) of the source (G = that iteration's global batch), taken as
// G / (micro * dp) micro-steps of micro * dp consecutive samples, of which data-parallel rank r
// gets the r-th slice of `micro`. Which samples an iteration covers therefore depends only on
// `consumed` and G, never on dp, so a run resumed with another data-parallel size or another
// global batch (batch ramp) continues with exactly the next sample.
//
// Thread safety: next() is called from one thread (the trainer); the prefetch thread is owned
// and joined by the Loader. Errors in the prefetch thread (a bad token id) resurface from next().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "data/sample_source.h"

namespace mtnlg {

struct MicroBatch {
  Tensor tokens;   // i32 [micro, S]: inputs
  Tensor targets;  // i32 [micro, S]: inputs shifted by one
  // Source index of row 0. first_sample / micro is the micro-batch's id (it selects the dropout
  // streams), the same for the same samples whatever the data-parallel size.
  int64_t first_sample = 0;
  bool last_of_iteration = false;
};

struct LoaderOptions {
  int64_t micro_batch_size = 1;
  int64_t data_rank = 0;
  int64_t data_size = 1;
  int64_t vocab_size = 0;   // token ids must be < vocab_size
  int64_t prefetch = 4;     // micro-batches prepared ahead
  std::string source_name;  // for error messages (the data prefix or "blend")
};

class Loader {
 public:
  // global_batch_at(consumed) gives the global batch of the iteration that starts there.
  Loader(const SampleSource& source, LoaderOptions options, int64_t consumed_samples,
         std::function<int64_t(int64_t)> global_batch_at);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next micro-batch of this rank, in order. Blocks until it is ready.
  MicroBatch next();

 private:
  void run();
  MicroBatch make(int64_t step_first_sample) const;

  const SampleSource& source_;
  LoaderOptions opt_;
  std::function<int64_t(int64_t)> global_batch_at_;
  int64_t consumed_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<MicroBatch> ready_;  // guarded by mu_
  std::exception_ptr error_;      // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  std::thread thread_;
};

}  // namespace mtnlg
