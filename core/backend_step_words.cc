// Backend's default step-word operations (AdamWStepWords): the words brought to the host, the
// shared arithmetic (core/kernels/adamw_math.h) run there, and the words copied back. On the CPU
// the copies are memory copies; the CUDA backend runs the same arithmetic on the device.
#include <vector>

#include "core/backend.h"
#include "core/kernels/adamw_math.h"

namespace mtnlg {

void Backend::do_grad_clip_words(Tensor& words, const Tensor& sums, int64_t first,
                                 const Tensor& loss, double max_norm) {
  Tensor w = Tensor::cpu({AdamWStepWords::kCount}, DType::kF64);
  Tensor s = Tensor::cpu({sums.numel()}, DType::kF64);
  Tensor l = Tensor::cpu({1}, DType::kF64);
  copy(w, words);
  copy(s, sums);
  copy(l, loss);
  kernels::grad_clip_words(w.data_as<double>(), s.data_as<double>(), s.numel(), first,
                           l.data_as<double>()[0], max_norm);
  copy(words, w);
}

void Backend::do_adamw_update_many_from(const std::vector<AdamWItem>& items, const Tensor& words) {
  Tensor w = Tensor::cpu({AdamWStepWords::kCount}, DType::kF64);
  copy(w, words);
  const double* v = w.data_as<double>();
  if (v[AdamWStepWords::kSkip] != 0.0) return;
  // The items with the words' values in their arguments: adamw_coeffs then rounds exactly what
  // kernels::adamw_coeffs_from rounds on a device.
  std::vector<AdamWItem> stepped = items;
  for (AdamWItem& it : stepped) {
    it.args.lr = v[AdamWStepWords::kLr];
    it.args.grad_scale = v[AdamWStepWords::kGradScale];
    it.args.bias_correction1 = v[AdamWStepWords::kBiasCorrection1];
    it.args.bias_correction2 = v[AdamWStepWords::kBiasCorrection2];
  }
  adamw_update_many(stepped);
}

}  // namespace mtnlg
