#include "cmd/eval.h"

#include <algorithm>
#include <cmath>

#include "core/backend.h"
#include "core/status.h"

namespace mtnlg {

EvalResult evaluate(GPTStage& model, const SampleSource& source, int64_t count,
                    int64_t micro_batch) {
  const int64_t seq = model.config().seq;
  MTNLG_CHECK_EQ(source.seq_length(), seq);
  MTNLG_CHECK_GT(micro_batch, 0);
  MTNLG_CHECK(0 < count && count <= source.size());
  model.set_training(false);
  Backend& backend = model.backend();
  std::vector<int32_t> row(static_cast<size_t>(seq + 1));
  double loss_sum = 0;
  FrozenWeights frozen(backend);
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
  }
  EvalResult r;
  r.samples = count;
  r.tokens = count * seq;
  r.loss = loss_sum / static_cast<double>(r.tokens);
  r.ppl = std::exp(r.loss);
  return r;
}

}  // namespace mtnlg
