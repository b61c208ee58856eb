#include "optim/captured_adamw_step.h"

#include "core/kernels/adamw_math.h"
#include "core/status.h"

namespace mtnlg {

CapturedAdamWStep::CapturedAdamWStep(AdamW& adamw, const ParamRegistry& params, Backend& backend)
    : adamw_(adamw), backend_(backend), slot_(backend) {
  const Communicator* tensor = adamw.tensor_group();
  MTNLG_CHECK_MSG(tensor == nullptr || tensor->size() == 1,
                  "CapturedAdamWStep: the norm of a tensor group sums over its ranks on the host");
  // global_grad_norm's gradients and order: tied copies left out, shards then the rest.
  std::vector<Tensor> replicated;
  for (const auto& p : params.params()) {
    if (p.spec.tied == Tied::kCopy) continue;
    (p.spec.partition_dim >= 0 ? grads_ : replicated).push_back(p.grad);
  }
  first_ = std::ssize(grads_);
  grads_.insert(grads_.end(), replicated.begin(), replicated.end());
  sums_ = backend_.alloc({std::max<int64_t>(std::ssize(grads_), 1)}, DType::kF64);
  sums_ = sums_.slice(0, std::ssize(grads_));
  words_ = backend_.alloc({AdamWStepWords::kCount}, DType::kF64);
}

bool CapturedAdamWStep::queue(double lr, double loss_scale, const Tensor& loss) {
  MTNLG_CHECK_MSG(!queued_, "CapturedAdamWStep: a step queued twice without finish()");
  const int64_t step = adamw_.steps() + 1;
  const OptimizerConfig& c = adamw_.config();
  Tensor host = Tensor::cpu({4}, DType::kF64);
  double* h = host.data_as<double>();
  h[AdamWStepWords::kLr] = lr;
  h[AdamWStepWords::kBiasCorrection1] = kernels::adamw_bias_correction(c.beta1, step);
  h[AdamWStepWords::kBiasCorrection2] = kernels::adamw_bias_correction(c.beta2, step);
  h[AdamWStepWords::kLossScale] = loss_scale;
  Tensor head = words_.slice(0, 4);
  backend_.copy(head, host);  // in stream order: a device copies through pinned memory

  // The recorded calls: every value that changes between steps is read from the words. The
  // items' own lr, step and grad_scale are ignored (adamw_update_many_from), so those recorded
  // here stay what they are.
  auto calls = [&be = backend_, grads = grads_, sums = sums_, words = words_, loss,
                items = adamw_.items(lr, 1.0, step), first = first_,
                max_norm = c.clip_grad]() mutable {
    be.sum_squares_into(sums, grads);
    be.grad_clip_words(words, sums, first, loss, max_norm);
    be.adamw_update_many_from(items, words);
  };
  if (slot_.plain_next()) {
    calls();
    slot_.ran_plainly();
    queued_ = true;
    return false;
  }
  const bool recorded = slot_.record_if(loss_ != loss.data(), calls);
  loss_ = loss.data();
  slot_.replay();
  queued_ = true;  // only once it is: a refused recording leaves nothing to finish
  return recorded;
}

CapturedAdamWStep::Result CapturedAdamWStep::finish() {
  MTNLG_CHECK_MSG(queued_, "CapturedAdamWStep: finish() without a queued step");
  queued_ = false;
  Tensor host = Tensor::cpu({AdamWStepWords::kCount}, DType::kF64);
  backend_.copy(host, words_);  // the one wait
  const double* w = host.data_as<double>();
  Result r;
  r.loss = w[AdamWStepWords::kLoss];
  r.sum_squares = w[AdamWStepWords::kSumSquares];
  r.updated = w[AdamWStepWords::kSkip] == 0.0;
  if (r.updated) adamw_.set_steps(adamw_.steps() + 1);
  return r;
}

}  // namespace mtnlg
