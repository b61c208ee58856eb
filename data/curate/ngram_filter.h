// Downstream-task n-gram removal exactly as Megatron-LM's tools/openwebtext/filter_ngrams.py
// (in Megatron-LM's history; removed in 2025) does it with its defaults, quirks included:
//
// Words: `\w+` matches (Python's re: letters, numbers and '_'; not combining marks) of
// text.lower() (Python's full lower-casing), with their code-point positions in the lowered
// text; the positions then index the original text (where lower-casing changes a text's length,
// as for 'İ', they drift, as in the script). A word sequence's key is its words joined by single
// spaces.
//
// Task n-grams: a task text of fewer than min_ngram (8) words adds nothing; one of fewer than
// max_ngram (13) words adds itself whole; every text adds each of its 13-word windows.
//
// Scanning a text (free_ngram): at each window start i (0 .. words - 13), the 13-gram there, then
// every n-gram length in use (ascending) starting at i, is looked up; after the last window, the
// shorter lengths at every start inside the last 13 words (only when the text has more than 13
// words). The first hit ends the scan of that text:
//   counting  (pass 1) the hit's n-gram counts once for the document, and the text after it
//             (from the hit's start + its key's length + 1) is scanned next;
//   cleaning  (pass 2) the text is cut: the part before the last '.', '!' or '?' at or before
//             200 characters ahead of the hit is kept when longer than 200 characters, and the
//             part after the first of them at or after 200 characters past the hit's key length
//             is scanned next when longer than 200 characters.
// A text of fewer than 13 words is never scanned (the loops do not run): it is kept whole.
// Texts are scanned first in, first out; the kept pieces come out in the order they were cut.
//
// Pass 1 counts, for each task n-gram, the training documents in which it was hit; pass 2 uses
// only the n-grams hit in fewer than key_threshold (10) documents (common phrases are not task
// leaks). A document cut into more than splits_count (10) pieces is dropped.
//
// Not thread-safe to build; const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/python_text.h"

namespace mtnlg::curate {

struct NgramFilterOptions {
  int max_ngram = 13;
  int min_ngram = 8;
  int64_t filter_text_char_len = 200;
  int64_t key_threshold = 10;
  int64_t splits_count = 10;
  int64_t remove_char_each_side = 200;
};

class TaskNgrams {
 public:
  explicit TaskNgrams(NgramFilterOptions o) : o_(o) {}

  // Adds a task text's n-grams (UTF-8).
  void add_task_text(std::string_view utf8);
  int64_t size() const { return static_cast<int64_t>(grams_.size()); }
  const NgramFilterOptions& options() const { return o_; }

  // Pass 1 on one document: the n-grams hit in it (each once).
  std::vector<int64_t> hits(std::string_view utf8) const;
  // Adds a document's hits to the counts.
  void count(const std::vector<int64_t>& hits);
  // Keeps only the n-grams hit in fewer than key_threshold documents for pass 2.
  void keep_below_threshold();
  int64_t active() const;

  // Pass 2 on one document: its pieces (UTF-8), all of them (the caller drops a document of more
  // than splits_count pieces).
  std::vector<std::string> clean(std::string_view utf8) const;

  // The key and document count of n-gram i (for reports and tests).
  std::string key(int64_t i) const;
  int64_t documents_hit(int64_t i) const { return counts_[static_cast<size_t>(i)]; }

 private:
  struct Gram {
    std::vector<int32_t> words;  // word ids
  };
  struct Scan;
  // One scan of a text list (FIFO) in counting or cleaning mode.
  void scan(std::u32string text, bool counting, std::vector<int64_t>* hits,
            std::vector<std::u32string>* pieces) const;
  int64_t find(const int32_t* ids, int len) const;  // -1 when absent or inactive
  // -1 when no task has it; `hash` is word_hash(w) (python_words computes it while it scans).
  int32_t word_id(std::u32string_view w, uint64_t hash) const;
  int32_t add_word(std::u32string_view w, uint64_t hash);
  void place(int32_t id);  // into slots_
  std::u32string_view word(int32_t id) const {
    const auto [at, len] = spans_[static_cast<size_t>(id)];
    return std::u32string_view(arena_).substr(at, len);
  }

  NgramFilterOptions o_;
  // The task words, by id: their code points one after another in arena_, (offset, length) each.
  std::u32string arena_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
  // The vocabulary: open addressing on the words' hashes, at most half full, each slot the hash
  // beside the id (-1 empty), so that a probe reads one cache line and compares code points only
  // on an equal hash. Every training word is looked up here.
  struct Slot {
    uint64_t hash = 0;
    int32_t id = -1;
  };
  std::vector<Slot> slots_ = std::vector<Slot>(1024);
  std::vector<uint64_t> hashes_;  // [id]
  std::vector<Gram> grams_;
  std::unordered_map<uint64_t, std::vector<int64_t>> index_;  // hash of word ids -> grams
  std::vector<int64_t> counts_;
  std::vector<char> active_;
  std::vector<int> lengths_;  // distinct lengths of the active n-grams, ascending
  // Per word id, bit L set when an active n-gram of L words starts with it: most windows are
  // ruled out by their first word without hashing them.
  std::vector<uint64_t> starts_;
  void index_starts();
};

// The `\w+` words of a (lowered) text, as views into it, with their code-point positions, and
// (when `hashes` is given) each word's word_hash, computed in the same pass.
void python_words(const std::u32string& lowered, std::vector<std::u32string_view>* words,
                  std::vector<int64_t>* positions, std::vector<uint64_t>* hashes = nullptr);
// A word's hash: FNV-1a over its code points, then a 64-bit finalizer (murmur3's fmix64).
uint64_t word_hash(std::u32string_view w);

}  // namespace mtnlg::curate
