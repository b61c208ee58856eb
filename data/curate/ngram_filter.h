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
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/python_text.h"
#include "data/unicode_classes.h"

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
  // One scan of a text and the texts its hits leave (the script's FIFO) in counting or cleaning
  // mode. Texts stay UTF-8: lower-casing and the words run on the bytes, positions and lengths
  // counted in code points, as the script counts them.
  void scan(std::string text, bool counting, std::vector<int64_t>* hits,
            std::vector<std::string>* pieces) const;
  struct ScanText;  // a text of a scan and its words (ngram_filter.cc)
  // `text`, its lowered form and its words' ids into *s.
  void load(std::string text, ScanText* s) const;
  int64_t find(const int32_t* ids, int len) const;  // -1 when absent or inactive
  // -1 when no task has it; `hash` is word_hash(w).
  int32_t word_id(std::string_view w, uint64_t hash) const;
  int32_t add_word(std::string_view w, uint64_t hash);
  void place(int32_t id);  // into slots_
  std::string_view word(int32_t id) const {
    const auto [at, len] = spans_[static_cast<size_t>(id)];
    return std::string_view(arena_).substr(at, len);
  }

  NgramFilterOptions o_;
  // The task words, by id: their UTF-8 bytes one after another in arena_, (offset, length) each.
  std::string arena_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
  // The vocabulary: open addressing on the words' hashes (the low bits pick the slot), at most
  // half full, each slot the hash's high half beside the id (-1 empty), so that a probe reads one
  // cache line and compares bytes only on an equal hash. Every training word is looked up here:
  // 8-byte slots keep a task vocabulary of 2,000 words in L1 (16-byte ones did not, and the
  // probe's load was a tenth of the stage's time).
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;
  };
  static uint32_t tag_of(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }
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

// A word's hash: FNV-1a over its UTF-8 bytes (computed byte by byte while the scan finds the
// word: a hash over eight bytes at a time after it, measured, was slower), then a 64-bit
// finalizer (murmur3's fmix64).
inline constexpr uint64_t kWordHashBasis = 0xcbf29ce484222325ull;
inline uint64_t word_hash_step(uint64_t h, unsigned char byte) {
  return (h ^ byte) * 0x100000001b3ull;
}
inline uint64_t word_hash_finish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}
inline uint64_t word_hash(std::string_view w) {
  uint64_t h = kWordHashBasis;
  for (const char c : w) h = word_hash_step(h, static_cast<unsigned char>(c));
  return word_hash_finish(h);
}

// One `\w+` word of a lowered UTF-8 text: its bytes, its code-point position and length, and
// its word_hash.
struct TextWord {
  std::string_view bytes;
  int64_t position;
  int32_t length;
  uint64_t hash;
};

// Calls fn(TextWord) for each `\w+` word of a lowered (python_lower_utf8), well-formed UTF-8
// text, in order, in one pass over its bytes.
template <typename F>
void for_each_python_word(std::string_view t, F&& fn) {
  const size_t n = t.size();
  size_t i = 0;
  int64_t cp = 0;  // code points before byte i
  // A non-ASCII code point at byte i: whether it is a word character, and its length in bytes.
  const auto wide = [&](size_t* len) {
    char32_t u;
    *len = decode_utf8(t.substr(i), &u);
    return python_word_char_unicode(u);
  };
  while (i < n) {
    // Up to the next word character.
    size_t len = 0;
    while (i < n) {
      const auto c = static_cast<unsigned char>(t[i]);
      if (c < 0x80) {
        if (kAsciiWordChar[c]) break;
        ++i;
      } else {
        if (wide(&len)) break;
        i += len;
      }
      ++cp;
    }
    if (i == n) break;
    const size_t begin = i;
    const int64_t position = cp;
    uint64_t h = kWordHashBasis;
    while (i < n) {
      const auto c = static_cast<unsigned char>(t[i]);
      if (c < 0x80) {
        if (!kAsciiWordChar[c]) break;
        h = word_hash_step(h, c);
        ++i;
      } else {
        if (!wide(&len)) break;
        for (const size_t end = i + len; i < end; ++i)
          h = word_hash_step(h, static_cast<unsigned char>(t[i]));
      }
      ++cp;
    }
    fn(TextWord{t.substr(begin, i - begin), position, static_cast<int32_t>(cp - position),
                word_hash_finish(h)});
  }
}

// The words of a lowered UTF-8 text, as for_each_python_word finds them.
std::vector<TextWord> python_words(std::string_view lowered);

}  // namespace mtnlg::curate
