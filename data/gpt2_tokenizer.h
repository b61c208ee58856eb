// Gpt2Tokenizer: GPT-2's byte-level BPE (the tokenizer of Megatron's GPT2BPETokenizer), loaded
// from encoder.json (token -> id) and vocab.bpe (merges, in rank order), as shipped in
// data/gpt2/. encode() gives the ids GPT-2's encoder.py gives; decode() inverts it.
//
// encode: text -> GPT-2 pre-tokenizer pieces (data/gpt2_pretokenizer.h) -> the UTF-8 bytes of
// each piece -> BPE: repeatedly merge every occurrence of the adjacent pair with the lowest
// merge rank, left to right, until no pair has a rank -> ids. The byte-to-unicode map of GPT-2
// only matters for reading the vocabulary files; internally tokens are raw byte strings.
//
// Invalid UTF-8: GPT-2 encodes Python str, so bytes must be decoded first. The choice here is
// Python's bytes.decode("utf-8", errors="replace"): each maximal ill-formed subpart becomes
// U+FFFD (bytes EF BF BD), then the text is encoded as usual. decode(encode(x)) == x for valid
// UTF-8 x; for invalid x it returns replace_invalid_utf8(x).
//
// "<|endoftext|>" in the text is plain text (several ids), as in GPT-2's encoder; the
// end-of-document id is eod() (50256), appended by the caller.
//
// Ownership and threads: the tokenizer is immutable after load, so every const method is safe
// from any thread. The BPE cache lives in a Gpt2Tokenizer::Cache that the caller owns, one per
// thread; encode(text) without one uses a cache for that call only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/gpt2_pretokenizer.h"

namespace mtnlg {

class Gpt2Tokenizer {
 public:
  // Per-thread state of encode: piece -> ids cache and scratch buffers. Not thread-safe.
  class Cache {
   public:
    // Entries kept before the cache is cleared (bounds memory on corpora with many rare words).
    static constexpr size_t kMaxEntries = size_t{1} << 18;

   private:
    friend class Gpt2Tokenizer;
    // Transparent, so that a piece (string_view) is looked up without copying it.
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    };
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids;
    PretokenizerScratch pretokenizer;
    std::vector<std::string_view> pieces;
    std::string replaced;  // the text after replace_invalid_utf8, when it had to be
    std::vector<int32_t> symbols, next, prev;
    std::vector<uint64_t> heap, batch;  // (rank << 32 | position), popped lowest first
  };

  // Reads both files. Throws not_found if one is missing, corruption if one is malformed (a
  // token that is not in GPT-2's byte alphabet, a merge whose parts or result are not tokens,
  // a missing single-byte token), naming the file, line and fix.
  static std::shared_ptr<const Gpt2Tokenizer> load(const std::string& vocab_file,
                                                   const std::string& merge_file);

  // The ids of `text` (any bytes). The overload with a cache appends to *ids.
  std::vector<int32_t> encode(std::string_view text) const;
  void encode(std::string_view text, Cache& cache, std::vector<int32_t>* ids) const;

  // The bytes of the tokens, concatenated. Throws invalid_argument for an id not in the vocab.
  std::string decode(std::span<const int32_t> ids) const;

  // <|endoftext|>: 50256 for GPT-2.
  int32_t eod() const { return eod_; }
  // One more than the largest id (50257 for GPT-2).
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // The bytes of one token ("" for an id with no token).
  std::string_view token_bytes(int32_t id) const;

 private:
  struct MergeRule {
    int32_t rank;
    int32_t merged;  // the id of the concatenation
  };
  Gpt2Tokenizer() = default;
  void bpe(std::string_view piece, Cache& cache, std::vector<int32_t>* ids) const;
  const MergeRule* find_merge(int32_t left, int32_t right) const;

  std::vector<std::string> tokens_;                 // [vocab_size]: id -> bytes
  std::unordered_map<std::string, int32_t> ids_;    // bytes -> id
  int32_t byte_ids_[256] = {};                      // id of each single byte
  std::unordered_map<uint64_t, MergeRule> merges_;  // (left << 32 | right) -> rule
  int32_t eod_ = -1;
};

// GPT-2's reversible map from bytes to printable code points (bytes_to_unicode in encoder.py):
// printable Latin-1 bytes map to themselves, the other 68 to U+0100 onwards, in byte order.
char32_t gpt2_byte_to_unicode(uint8_t byte);

}  // namespace mtnlg
