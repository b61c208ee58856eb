// The CPU backend's checks of ids that come from data (token and target ids), shared by its
// embedding and cross-entropy operations (core/cpu/embedding_cpu.cc, cross_entropy_cpu.cc), at
// the operation (core/id_checks.h).
#pragma once

#include <cstdint>
#include <utility>

#include "core/backend_checks.h"
#include "core/id_checks.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg::cpu {

inline void check_ids(const int32_t* ids, int64_t n, int64_t limit, const char* op,
                      const char* what, const char* fix) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= limit) throw bad_id_error(op, what, ids[i], i, limit, fix);
  }
}

// A vocab-parallel cross-entropy step's (n, real columns), its target ids checked (the rest of
// its contract: Backend's front).
inline std::pair<int64_t, int64_t> shard_rows(const char* op, const Tensor& logits,
                                              const Tensor* targets, int64_t vocab_start,
                                              int64_t vocab) {
  const auto shard = ce_shard_rows_and_real(op, logits, vocab_start, vocab);
  if (targets != nullptr) {
    check_ids(targets->data_as<int32_t>(), shard.first, vocab, op, "target id",
              "the data's vocabulary is larger than the model's (check model.vocab_size)");
  }
  return shard;
}

}  // namespace mtnlg::cpu
