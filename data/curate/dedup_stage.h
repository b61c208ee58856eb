// `mtnlg-curate dedup`: fuzzy deduplication across datasets, as MT-NLG's corpus was built:
//
//   1. every document's shingles (data/curate/shingles.h) and MinHash signature (minhash.h);
//      documents whose normalized texts are identical (XXH3-128) are exact duplicates, joined
//      at once, and only the first of each (in keep order) goes on;
//   2. LSH: b bands of r rows (datasketch's optimal (b, r) for the threshold unless given);
//      documents whose signatures agree on a whole band share a bucket and are candidates;
//   3. every candidate pair is verified by the exact Jaccard similarity of the two shingle
//      sets; a pair at or above the threshold is an edge. Pairs are taken in a fixed order
//      (band, bucket, document order) and one whose documents are already connected is not
//      verified again (it cannot change the components);
//   4. the groups are the connected components (union-find); each keeps one document: the one
//      whose dataset comes first in --priority, ties by the input file's position on the
//      command line, then by line number.
//
// Outputs: for every input FILE of dataset NAME, OUTPUT_DIR/NAME/basename(FILE) with the kept
// records' lines unchanged and in order (compressed as the name says); REPORT, one JSON line
// per group (members, the kept one, the verified pairs with their similarity); and
// OUTPUT_DIR/dedup_summary.json (per dataset: documents, kept, removed as exact and as fuzzy
// duplicates, bad records skipped; the LSH parameters). Every file is written under a temporary
// name and renamed when complete. The same inputs and flags give the same bytes whatever the
// thread count.
//
// Memory: the components step holds about kComponentBytesPerDocument bytes a document (its
// place, keep order, union-find, one band's sorted keys at a time, the offset of its text in a
// scratch file) and a batch of records; the candidates' normalized texts go to an unnamed
// scratch file in the work directory (data/curate/spill_file.h) and are read back per pair.
// --memory-mb checks that estimate before anything is allocated. The other steps hold a batch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/curate/minhash.h"
#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

struct DedupInput {
  std::string dataset, file;
};

// "NAME=FILE"; throws invalid_argument naming --input otherwise.
DedupInput parse_dedup_input(const std::string& spec);

// The steps a cluster runs apart (scripts/slurm/curate.sbatch), meeting through WORK_DIR:
//   signatures  each task signs its shards (shard f belongs to task f % task_count):
//               WORK_DIR/signatures-F.bin, made again only when absent or made under other
//               settings (a killed task's rerun redoes only its unfinished shards);
//   components  one task: exact duplicates, LSH buckets, verified pairs, components; writes the
//               report, the summary and WORK_DIR/keep-F.bin (each record's fate);
//   output      each task writes its shards' kept records.
// kAll runs the three in one process over the same files: a cluster's steps give its bytes.
enum class DedupStep { kAll, kSignatures, kComponents, kOutput };

struct DedupOptions {
  std::vector<DedupInput> inputs;     // command-line order
  std::vector<std::string> priority;  // every dataset, the first kept first
  double threshold = 0.8;
  int num_perm = 128;
  uint32_t seed = 1;
  HashFamily family = HashFamily::kXxh3;
  int bands = 0, rows = 0;  // 0 and 0: datasketch's optimal for the threshold
  std::string output_dir, report;
  std::string work_dir;  // "": OUTPUT_DIR/.work
  DedupStep step = DedupStep::kAll;
  int task_index = 0, task_count = 1;
  std::string text_key = "text";
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;
  int64_t batch_mb = 16;
  int64_t memory_mb = 0;  // 0: no budget; else the components step refuses a larger estimate
  ProgressMode progress = ProgressMode::kAuto;
};

struct DatasetCounts {
  int64_t documents = 0, kept = 0, exact_removed = 0, fuzzy_removed = 0, skipped = 0;
};

struct DedupStats {
  int bands = 0, rows = 0;
  int64_t documents = 0, groups = 0, candidate_pairs = 0, verified_pairs = 0, edges = 0;
  std::map<std::string, DatasetCounts> datasets;
  double seconds = 0;
};

// What the components step holds a document, and its estimate in MB for `documents` and a
// batch of --batch-mb (read, decoded and normalized: three times over), with 16 MB for the
// program itself.
inline constexpr int kComponentBytesPerDocument = 96;
double dedup_components_memory_mb(int64_t documents, int64_t batch_mb);

DedupStats run_dedup(const DedupOptions& o);

}  // namespace mtnlg::curate
