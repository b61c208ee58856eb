#include "bench/model_flops.h"

#include <string_view>

namespace mtnlg::bench {

ModelFlops model_flops(const GPTConfig& c, const ParamRegistry& params) {
  ModelFlops f;
  for (const Param& p : params.params()) {
    if (!std::string_view(p.spec.name).starts_with("embedding.")) {
      f.non_embedding_params += shape_numel(p.spec.global_shape);
    }
  }
  f.head_params = c.padded_vocab * c.hidden;
  f.n = f.non_embedding_params + f.head_params;
  f.attention_per_token = 12.0 * static_cast<double>(c.num_layers * c.hidden * c.seq);
  f.per_token = 6.0 * static_cast<double>(f.n) + f.attention_per_token;
  return f;
}

}  // namespace mtnlg::bench
