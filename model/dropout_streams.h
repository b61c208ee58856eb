// Which random stream each dropout site draws from. A site's stream is fixed by the global
// micro-batch number and the site's place in the model, never by which rank or stage runs it,
// so activation recomputation and (later) any pipeline layout redraw identical masks.
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace mtnlg {

enum class DropoutSite : uint64_t { kAttentionProbs = 0, kAttentionOutput = 1, kMlpOutput = 2 };

// Stream ids: high 44 bits the micro-batch, low 20 bits the site (0: embedding; 1 + 3*layer + k).
// A micro-batch's streams are micro-batch 0's plus this base, so a step captured with micro-batch
// 0 replays any micro-batch's masks after Backend::set_rng_stream_base(its base).
inline uint64_t micro_batch_stream_base(uint64_t micro_batch) {
  return micro_batch << 20;
}

inline RngStream embedding_dropout_stream(uint64_t seed, uint64_t micro_batch) {
  return RngStream{seed, micro_batch_stream_base(micro_batch), 0};
}

inline RngStream layer_dropout_stream(uint64_t seed, uint64_t micro_batch, int64_t layer,
                                      DropoutSite site) {
  const uint64_t s = 1 + 3 * static_cast<uint64_t>(layer) + static_cast<uint64_t>(site);
  return RngStream{seed, micro_batch_stream_base(micro_batch) | s, 0};
}

}  // namespace mtnlg
