// The learnable token corpus the in-process trainer tests train on.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/indexed_dataset_builder.h"

namespace mtnlg::test {

// A corpus with learnable structure: documents walk a fixed random successor table (each token
// has two likely successors), so a model can push the loss well below log(vocab).
inline void write_corpus(const std::string& prefix, int docs, int vocab, int max_token = -1) {
  IndexedDatasetBuilder builder(prefix, TokenType::kUInt16);
  std::mt19937 rng(7);
  std::vector<int32_t> next_a(vocab), next_b(vocab);
  for (int v = 0; v < vocab; ++v) {
    next_a[v] = static_cast<int32_t>(rng() % vocab);
    next_b[v] = static_cast<int32_t>(rng() % vocab);
  }
  for (int d = 0; d < docs; ++d) {
    std::vector<int32_t> doc;
    int32_t t = static_cast<int32_t>(rng() % vocab);
    const int len = 20 + static_cast<int>(rng() % 60);
    for (int i = 0; i < len; ++i) {
      doc.push_back(t);
      t = (rng() % 4 == 0) ? next_b[t] : next_a[t];
    }
    if (max_token >= 0 && d == docs - 1) doc.push_back(max_token);
    builder.add_document(doc);
  }
  builder.finish();
}

}  // namespace mtnlg::test
