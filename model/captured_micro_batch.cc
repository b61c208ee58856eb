#include "model/captured_micro_batch.h"

#include "core/status.h"
#include "model/dropout_streams.h"

namespace mtnlg {

bool CapturedMicroBatch::run(StageActivations& acts, const Tensor& tokens, const Tensor& targets,
                             uint64_t micro_batch_id, double grad_scale, LossSum& loss) {
  MTNLG_CHECK_MSG(model_.stage().pre_process && model_.stage().post_process,
                  "CapturedMicroBatch: the stage must hold the embedding and the LM head");
  if (slot_.plain_next()) {
    model_.forward(acts, tokens, targets, micro_batch_id, loss);
    model_.backward(acts, Tensor(), grad_scale);
    slot_.ran_plainly();
    return false;
  }
  backend_.copy(acts.tokens, tokens);
  backend_.copy(acts.targets, targets);
  const bool recorded =
      slot_.record_if(acts_ != &acts || loss_ != &loss || grad_scale_ != grad_scale,
                      [this, &acts, &loss, grad_scale] {
                        // acts.tokens onto itself: nothing to copy (Backend::copy).
                        model_.forward(acts, acts.tokens, acts.targets, 0, loss);
                        model_.backward(acts, Tensor(), grad_scale);
                      });
  acts_ = &acts;
  loss_ = &loss;
  grad_scale_ = grad_scale;
  backend_.set_rng_stream_base(micro_batch_stream_base(micro_batch_id));
  slot_.replay();
  backend_.set_rng_stream_base(0);
  return recorded;
}

}  // namespace mtnlg
