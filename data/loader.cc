#include "data/loader.h"

#include <string>

#include "core/status.h"

namespace mtnlg {

Loader::Loader(const SampleSource& source, LoaderOptions options, int64_t consumed_samples,
               std::function<int64_t(int64_t)> global_batch_at)
    : source_(source),
      opt_(std::move(options)),
      global_batch_at_(std::move(global_batch_at)),
      consumed_(consumed_samples) {
  MTNLG_CHECK(opt_.micro_batch_size > 0 && opt_.data_size > 0);
  MTNLG_CHECK(0 <= opt_.data_rank && opt_.data_rank < opt_.data_size);
  thread_ = std::thread([this] { run(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

MicroBatch Loader::make(int64_t step_first) const {
  const int64_t micro = opt_.micro_batch_size, seq = source_.seq_length();
  MicroBatch mb;
  mb.tokens = Tensor::cpu({micro, seq}, DType::kI32);
  mb.targets = Tensor::cpu({micro, seq}, DType::kI32);
  mb.first_sample = step_first + opt_.data_rank * micro;
  std::vector<int32_t> sample(static_cast<size_t>(seq + 1));
  int32_t* tok = mb.tokens.data_as<int32_t>();
  int32_t* tgt = mb.targets.data_as<int32_t>();
  for (int64_t j = 0; j < micro; ++j) {
    const int64_t index = mb.first_sample + j;
    if (index >= source_.size()) {
      throw invalid_argument("the run needs sample " + std::to_string(index) +
                                 " but the data has " + std::to_string(source_.size()) +
                                 "; the sample index was built for a shorter run: delete "
                                 "data.cache_dir or lower schedule.train_tokens",
                             opt_.source_name);
    }
    source_.sample(index, sample.data());
    for (int64_t t = 0; t <= seq; ++t) {
      const int32_t id = sample[static_cast<size_t>(t)];
      if (id < 0 || id >= opt_.vocab_size) {
        throw invalid_argument("token id " + std::to_string(id) + " in sample " +
                                   std::to_string(index) + " is outside model.vocab_size " +
                                   std::to_string(opt_.vocab_size) +
                                   "; the data was tokenized with a larger vocabulary: set "
                                   "model.vocab_size to match the tokenizer",
                               opt_.source_name);
      }
    }
    std::copy_n(sample.begin(), seq, tok + j * seq);
    std::copy_n(sample.begin() + 1, seq, tgt + j * seq);
  }
  return mb;
}

void Loader::run() {
  const int64_t step_samples = opt_.micro_batch_size * opt_.data_size;
  try {
    int64_t consumed = consumed_;
    for (;;) {
      const int64_t global = global_batch_at_(consumed);
      MTNLG_CHECK_MSG(global > 0 && global % step_samples == 0,
                      "global batch " << global << " vs micro x dp " << step_samples);
      const int64_t steps = global / step_samples;
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t first = consumed + s * step_samples;
        MicroBatch mb = make(first);
        mb.last_of_iteration = s == steps - 1;
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock,
                 [&] { return stop_ || static_cast<int64_t>(ready_.size()) < opt_.prefetch; });
        if (stop_) return;
        ready_.push_back(std::move(mb));
        cv_.notify_all();
      }
      consumed += global;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    cv_.notify_all();
  }
}

MicroBatch Loader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  MicroBatch mb = std::move(ready_.front());
  ready_.pop_front();
  cv_.notify_all();
  return mb;
}

}  // namespace mtnlg
