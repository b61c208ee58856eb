// P2PCommunicator: the activations and gradients that adjacent pipeline stages exchange, named by
// direction as Megatron-LM's p2p_communication.py: forward traffic goes to the next stage,
// backward traffic to the previous one. Calls that would cross the ends of the pipeline (recv or
// send forward on the first stage, backward on the last) return at once.
//
// Deadlock rule: Communicator::send may block until the peer posts the matching recv, so the two
// halves of a combined exchange go in one Communicator::batch_send_recv (Megatron-LM's
// batch_isend_irecv): they progress together, and two neighbours that both send first still
// pair up, whatever the sizes.
//
// Ownership: borrows the pipeline group (null: a one-stage pipeline, every call a no-op) and the
// tensors only for the call. Thread safety: as the Communicator (one thread).
#pragma once

#include <chrono>

#include "core/tensor.h"
#include "parallel/communicator.h"

namespace mtnlg {

class P2PCommunicator {
 public:
  explicit P2PCommunicator(Communicator* pipeline);

  int stage() const { return stage_; }
  // Seconds spent in this object's calls so far: waiting for the neighbours (the pipeline's bubble
  // and any imbalance) and moving the bytes. bench/comm_bench.sh reports it against the plan.
  double seconds_in_calls() const { return seconds_; }
  int num_stages() const { return num_stages_; }
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == num_stages_ - 1; }

  // input [b, s, h] <- previous stage's output.
  void recv_forward(Tensor& input);
  // output [b, s, h] -> next stage's input.
  void send_forward(const Tensor& output);
  // output_grad [b, s, h] <- next stage's input gradient.
  void recv_backward(Tensor& output_grad);
  // input_grad [b, s, h] -> previous stage's output gradient.
  void send_backward(const Tensor& input_grad);
  // Both with the next stage: send_forward(output), recv_backward(output_grad).
  void send_forward_recv_backward(const Tensor& output, Tensor& output_grad);
  // Both with the previous stage: send_backward(input_grad), recv_forward(input).
  void send_backward_recv_forward(const Tensor& input_grad, Tensor& input);

  // The interleaved schedule's exchange around the ring (the last stage's next is the first, whose
  // previous is the last: model chunk c on the last stage feeds chunk c + 1 on the first), in one
  // batch: `output` (undefined: none) to the next stage, `input_grad` (undefined: none) to the
  // previous one, `input` from the previous one when recv_prev, `output_grad` from the next one
  // when recv_next. Forward traffic is ordered before backward traffic, so with two stages
  // (next == previous) the two pair up in order.
  void ring_exchange(const Tensor& output, const Tensor& input_grad, bool recv_prev, Tensor& input,
                     bool recv_next, Tensor& output_grad);

 private:
  // Sends `out` to and receives `in` from `peer`, both at once.
  void exchange(const Tensor& out, Tensor& in, int peer);

  // Runs f, adding its time to seconds_.
  template <typename F>
  void timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Communicator* pipeline_;
  double seconds_ = 0.0;
  int stage_ = 0;
  int num_stages_ = 1;
};

}  // namespace mtnlg
