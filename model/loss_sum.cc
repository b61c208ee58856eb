#include "model/loss_sum.h"

namespace mtnlg {

double LossSum::take(Backend& be) {
  Tensor sum = Tensor::cpu({1}, DType::kF64);
  be.copy(sum, total_);
  be.fill(total_, 0.0);
  const double loss = host_ + sum.data_as<double>()[0];
  host_ = 0.0;
  return loss;
}

double LossSum::take_read(Backend& be, double device_value) {
  be.fill(total_, 0.0);
  const double loss = host_ + device_value;
  host_ = 0.0;
  return loss;
}

}  // namespace mtnlg
