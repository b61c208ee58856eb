#include "parallel/p2p.h"

namespace mtnlg {

P2PCommunicator::P2PCommunicator(Communicator* pipeline) : pipeline_(pipeline) {
  if (pipeline_ != nullptr) {
    stage_ = pipeline_->rank();
    num_stages_ = pipeline_->size();
  }
}

void P2PCommunicator::recv_forward(Tensor& input) {
  if (!is_first_stage()) timed([&] { pipeline_->recv(input, stage_ - 1); });
}

void P2PCommunicator::send_forward(const Tensor& output) {
  if (!is_last_stage()) timed([&] { pipeline_->send(output, stage_ + 1); });
}

void P2PCommunicator::recv_backward(Tensor& output_grad) {
  if (!is_last_stage()) timed([&] { pipeline_->recv(output_grad, stage_ + 1); });
}

void P2PCommunicator::send_backward(const Tensor& input_grad) {
  if (!is_first_stage()) timed([&] { pipeline_->send(input_grad, stage_ - 1); });
}

void P2PCommunicator::send_forward_recv_backward(const Tensor& output, Tensor& output_grad) {
  if (!is_last_stage()) exchange(output, output_grad, stage_ + 1);
}

void P2PCommunicator::send_backward_recv_forward(const Tensor& input_grad, Tensor& input) {
  if (!is_first_stage()) exchange(input_grad, input, stage_ - 1);
}

void P2PCommunicator::ring_exchange(const Tensor& output, const Tensor& input_grad, bool recv_prev,
                                    Tensor& input, bool recv_next, Tensor& output_grad) {
  if (pipeline_ == nullptr || num_stages_ == 1) return;
  const int next = (stage_ + 1) % num_stages_, prev = (stage_ + num_stages_ - 1) % num_stages_;
  std::vector<P2POp> ops;
  if (output.defined()) ops.push_back({true, output, next});
  if (recv_prev) ops.push_back({false, input, prev});
  if (input_grad.defined()) ops.push_back({true, input_grad, prev});
  if (recv_next) ops.push_back({false, output_grad, next});
  if (!ops.empty()) timed([&] { pipeline_->batch_send_recv(ops); });
}

void P2PCommunicator::exchange(const Tensor& out, Tensor& in, int peer) {
  std::vector<P2POp> ops{{true, out, peer}, {false, in, peer}};
  timed([&] { pipeline_->batch_send_recv(ops); });
}

}  // namespace mtnlg
