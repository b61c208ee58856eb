// Shape and dtype rules of Backend operations that do not depend on the device, shared by the
// CPU and CUDA backends (each checks its own device first). A broken rule is a programming error:
// MTNLG_CHECK (Code::kInternal) naming the operation and the tensors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/kernels/vocab_shard_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

// An embedding's tensors: tokens i32 [b, s]; table [rows, c] (the word rows, or their gradient);
// positions [>= s, c] of the table's dtype, or undefined (none). Backward passes dout: the tables
// then hold acc_dtype(dout) (fp32 main gradients for a bf16 model).
inline void check_embedding_shapes(const char* op, const Tensor& tokens, const Tensor& table,
                                   const Tensor& positions, const Tensor* dout = nullptr) {
  const auto str = [](const Tensor& t) { return t.defined() ? t.str() : std::string("undefined"); };
  MTNLG_CHECK_MSG(tokens.dtype() == DType::kI32 && tokens.ndim() == 2 && table.ndim() == 2 &&
                      (!positions.defined() ||
                       (positions.ndim() == 2 && positions.dim(1) == table.dim(1) &&
                        positions.dtype() == table.dtype() && positions.dim(0) >= tokens.dim(1))) &&
                      (dout == nullptr || table.dtype() == acc_dtype(dout->dtype())),
                  op << ": tokens " << tokens.str() << ", table " << table.str() << ", positions "
                     << str(positions)
                     << (dout != nullptr ? ", dout " + dout->str() : std::string()));
}

// The vocab-parallel cross entropy's shard (Backend::cross_entropy_shard_*): logits [n, cols]
// holding global columns [vocab_start, vocab_start + cols) of a vocabulary of `vocab`. Returns
// (n, how many of its columns are real vocabulary).
inline std::pair<int64_t, int64_t> ce_shard_rows_and_real(const char* op, const Tensor& logits,
                                                          int64_t vocab_start, int64_t vocab) {
  MTNLG_CHECK_MSG(
      logits.ndim() >= 1 && vocab_start >= 0 && vocab > 0,
      op << ": logits " << logits.str() << ", vocab_start " << vocab_start << ", vocab " << vocab);
  const int64_t cols = logits.dim(-1);
  return {cols > 0 ? logits.numel() / cols : 0,
          kernels::shard_real_columns(vocab_start, cols, vocab)};
}

}  // namespace mtnlg
