// `mtnlg-curate dedup minhash`: one shard's documents -> their MinHash signatures, a uint32
// [documents, num_perm] .npy (row i: the i-th record of the shard; blank lines are not records,
// skipped bad records have no row). Streams the shard in batches (memory: the batch and the
// thread's buffers), signs a batch's documents on every thread, writes rows in input order, and
// commits the file atomically: the bytes depend only on the input and the flags, never on the
// thread count.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "data/curate/minhash.h"
#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

struct MinhashOptions {
  std::string input, output;
  std::string text_key = "text";
  HashFamily family = HashFamily::kXxh3;
  int num_perm = 128;
  uint32_t seed = 1;
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;  // 0: every core
  int64_t batch_mb = 16;
  ProgressMode progress = ProgressMode::kAuto;
};

struct MinhashStats {
  int64_t documents = 0;
  int64_t text_bytes = 0;   // UTF-8 bytes of the documents' texts
  int64_t input_bytes = 0;  // bytes of the shard as stored
  double seconds = 0;
  std::map<std::string, int64_t> skipped;
};

MinhashStats run_minhash(const MinhashOptions& o);

}  // namespace mtnlg::curate
