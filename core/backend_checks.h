// Shape and dtype rules of Backend operations that do not depend on the device, shared by the
// CPU and CUDA backends (each checks its own device first). A broken rule is a programming error:
// MTNLG_CHECK (Code::kInternal) naming the operation and the tensors.
#pragma once

#include <string>

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

}  // namespace mtnlg
