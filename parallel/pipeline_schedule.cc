#include "parallel/pipeline_schedule.h"

#include <algorithm>

#include "core/status.h"

namespace mtnlg {

int64_t max_in_flight(int64_t num_stages, int64_t stage, int64_t num_micro_batches) {
  return std::max<int64_t>(1, std::min(num_stages - stage, num_micro_batches));
}

PipelineBuffers make_pipeline_buffers(Backend& backend, const P2PCommunicator& p2p,
                                      const std::vector<int64_t>& shape, DType dtype) {
  PipelineBuffers b;
  if (!p2p.is_first_stage()) b.input = backend.alloc(shape, dtype);
  if (!p2p.is_last_stage()) b.output_grad = backend.alloc(shape, dtype);
  return b;
}

namespace {
void check_buffers(const P2PCommunicator& p2p, const PipelineBuffers& b, bool backward) {
  MTNLG_CHECK_MSG(p2p.is_first_stage() || b.input.defined(),
                  "pipeline stage " << p2p.stage() << " has no input receive buffer");
  MTNLG_CHECK_MSG(!backward || p2p.is_last_stage() || b.output_grad.defined(),
                  "pipeline stage " << p2p.stage() << " has no gradient receive buffer");
}
}  // namespace

void forward_backward_pipelining_without_interleaving(P2PCommunicator& p2p,
                                                      int64_t num_micro_batches,
                                                      PipelineBuffers& buffers,
                                                      const ForwardStep& forward_step,
                                                      const BackwardStep& backward_step) {
  const int64_t m = num_micro_batches;
  MTNLG_CHECK_GT(m, 0);
  check_buffers(p2p, buffers, true);
  const int64_t num_warmup = std::min<int64_t>(p2p.num_stages() - p2p.stage() - 1, m);
  const int64_t num_steady = m - num_warmup;
  Tensor& input = buffers.input;
  Tensor& output_grad = buffers.output_grad;
  int64_t next_forward = 0, next_backward = 0;

  // Warmup: forwards only, filling the pipeline.
  for (int64_t i = 0; i < num_warmup; ++i) {
    p2p.recv_forward(input);
    const Tensor output = forward_step(next_forward++, input);
    p2p.send_forward(output);
  }

  // Steady 1F1B: one forward, then the backward of the oldest micro-batch in flight.
  if (num_steady > 0) p2p.recv_forward(input);
  for (int64_t i = 0; i < num_steady; ++i) {
    const bool last = i == num_steady - 1;
    const Tensor output = forward_step(next_forward++, input);
    p2p.send_forward_recv_backward(output, output_grad);
    const Tensor input_grad = backward_step(next_backward++, output_grad);
    if (last) {
      p2p.send_backward(input_grad);
    } else {
      p2p.send_backward_recv_forward(input_grad, input);
    }
  }

  // Cooldown: the backwards of the warmup's micro-batches.
  for (int64_t i = 0; i < num_warmup; ++i) {
    p2p.recv_backward(output_grad);
    const Tensor input_grad = backward_step(next_backward++, output_grad);
    p2p.send_backward(input_grad);
  }
  MTNLG_CHECK_EQ(next_forward, m);
  MTNLG_CHECK_EQ(next_backward, m);
}

void forward_pipelining(P2PCommunicator& p2p, int64_t num_micro_batches, PipelineBuffers& buffers,
                        const ForwardStep& forward_step) {
  check_buffers(p2p, buffers, false);
  Tensor& input = buffers.input;
  for (int64_t i = 0; i < num_micro_batches; ++i) {
    p2p.recv_forward(input);
    const Tensor output = forward_step(i, input);
    p2p.send_forward(output);
  }
}

}  // namespace mtnlg
