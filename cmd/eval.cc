#include "cmd/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/backend.h"
#include "core/host_memory.h"
#include "core/status.h"

namespace mtnlg {

EvalResult evaluate(GPTStage& model, const SampleSource& source, int64_t count, int64_t micro_batch,
                    ProgressMode progress) {
  const int64_t seq = model.config().seq;
  MTNLG_CHECK_EQ(source.seq_length(), seq);
  MTNLG_CHECK_GT(micro_batch, 0);
  MTNLG_CHECK(0 < count && count <= source.size());
  model.set_training(false);
  Backend& backend = model.backend();
  // More than count samples a forward would change nothing; then the micro-batch's activations
  // are sized from one sample's before they are allocated (a huge --micro-batch is an error
  // naming it, not std::bad_alloc or the OOM killer).
  micro_batch = std::min(micro_batch, count);
  {
    const int64_t before = backend.live_bytes();
    StageActivations one = model.make_activations(1);
    const int64_t per_sample = backend.live_bytes() - before;
    if (per_sample > 0 && micro_batch > 1) {
      const int64_t limit = std::numeric_limits<int64_t>::max() / per_sample;
      if (micro_batch > limit)
        throw invalid_argument("--micro-batch " + std::to_string(micro_batch) +
                                   " needs more memory than any machine has (" +
                                   std::to_string(per_sample) + " bytes a sample)",
                               "--micro-batch");
      const HostMemory host = host_memory_available();
      if (host.available > 0 && micro_batch * per_sample > host.available)
        throw invalid_argument(
            "--micro-batch " + std::to_string(micro_batch) + " needs " +
                std::to_string((micro_batch * per_sample) >> 20) + " MiB of activations (" +
                std::to_string(per_sample >> 10) + " KiB a sample) but " + host.source + " has " +
                std::to_string(host.available >> 20) + " MiB available; the fix: --micro-batch " +
                std::to_string(std::max<int64_t>(1, host.available / per_sample / 2)) + " or less",
            "--micro-batch");
    }
  }
  std::vector<int32_t> row(static_cast<size_t>(seq + 1));
  double loss_sum = 0;
  FrozenWeights frozen(backend);
  Progress shown(progress, "loss", "samples", count);
  for (int64_t first = 0; first < count; first += micro_batch) {
    const int64_t b = std::min(micro_batch, count - first);
    Tensor tokens = Tensor::cpu({b, seq}, DType::kI32),
           targets = Tensor::cpu({b, seq}, DType::kI32);
    int32_t* t = tokens.data_as<int32_t>();
    int32_t* y = targets.data_as<int32_t>();
    for (int64_t i = 0; i < b; ++i) {
      source.sample(first + i, row.data());
      std::copy(row.begin(), row.end() - 1, t + i * seq);
      std::copy(row.begin() + 1, row.end(), y + i * seq);
    }
    StageActivations acts = model.make_activations(b);
    loss_sum += model.forward(acts, tokens, targets, static_cast<uint64_t>(first));
    shown.update(first + b);
  }
  shown.finish();
  EvalResult r;
  r.samples = count;
  r.tokens = count * seq;
  r.loss = loss_sum / static_cast<double>(r.tokens);
  r.ppl = std::exp(r.loss);
  return r;
}

}  // namespace mtnlg
