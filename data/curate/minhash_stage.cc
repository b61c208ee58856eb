#include "data/curate/minhash_stage.h"

#include <omp.h>

#include <chrono>
#include <vector>

#include "data/curate/npy.h"

namespace mtnlg::curate {

MinhashStats run_minhash(const MinhashOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const MinHasher hasher(o.family, o.num_perm, o.seed);
  TextRecords records(o.input, o.text_key, o.bad_records);
  NpyU32Writer out(o.output, o.num_perm);
  PreprocessProgress progress(o.progress, records.file_size(), 10000);
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  MinhashStats stats;
  std::vector<TextRecord> batch;
  std::vector<uint32_t> sigs;
  const auto batch_bytes = static_cast<size_t>(o.batch_mb) << 20;
  while (records.next_batch(&batch, batch_bytes)) {
    const auto n = static_cast<int64_t>(batch.size());
    sigs.resize(static_cast<size_t>(n * o.num_perm));
#pragma omp parallel num_threads(threads)
    {
      NormalizedText norm;
#pragma omp for schedule(dynamic, 16)
      for (int64_t i = 0; i < n; ++i) {
        normalize_for_shingles(batch[static_cast<size_t>(i)].text, &norm);
        hasher.signature(norm, sigs.data() + i * o.num_perm);
      }
    }
    out.append(sigs.data(), n);
    stats.documents += n;
    for (const TextRecord& r : batch) stats.text_bytes += static_cast<int64_t>(r.text.size());
    progress.update(records.bytes_read(), stats.documents, -1);
  }
  out.commit();
  progress.finish();
  stats.input_bytes = records.file_size();
  stats.skipped = records.skipped();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace mtnlg::curate
