#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/input_file.h"
#include "core/status.h"
#include "data/json_reader.h"
#include "data/unicode_classes.h"

namespace mtnlg {

namespace {

constexpr const char* kEodToken = "<|endoftext|>";

std::string read_whole_file(const std::string& path, const char* what) {
  return read_input_file(path, std::string("the GPT-2 ") + what +
                                   "; the fix: pass the file shipped in data/gpt2/ (or Megatron's "
                                   "gpt2-vocab.json / gpt2-merges.txt)");
}

// The inverse of gpt2_byte_to_unicode: code point -> byte, -1 for code points not in the map.
struct ByteDecoder {
  int16_t byte[324];  // every mapped code point is below U+0144
  ByteDecoder() {
    std::fill(std::begin(byte), std::end(byte), int16_t{-1});
    for (int b = 0; b < 256; ++b) byte[gpt2_byte_to_unicode(static_cast<uint8_t>(b))] = int16_t(b);
  }
  // The raw bytes of a token written in GPT-2's alphabet; false if a character is outside it.
  bool decode(std::string_view mapped, std::string* out) const {
    out->clear();
    for (size_t pos = 0; pos < mapped.size();) {
      char32_t cp;
      pos += decode_utf8(mapped.substr(pos), &cp);
      if (cp >= 324 || byte[cp] < 0) return false;
      out->push_back(static_cast<char>(byte[cp]));
    }
    return true;
  }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

char32_t gpt2_byte_to_unicode(uint8_t byte) {
  // Printable: '!'..'~', '¡'..'¬', '®'..'ÿ'; the rest count up from U+0100 in byte order.
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  if (printable(byte)) return byte;
  char32_t n = 0;
  for (int b = 0; b < byte; ++b) n += printable(b) ? 0 : 1;
  return 256 + n;
}

std::shared_ptr<const Gpt2Tokenizer> Gpt2Tokenizer::load(const std::string& vocab_file,
                                                         const std::string& merge_file) {
  std::shared_ptr<Gpt2Tokenizer> t(new Gpt2Tokenizer());
  const ByteDecoder byte_decoder;

  // encoder.json
  const auto members =
      parse_json_string_int_object(read_whole_file(vocab_file, "vocab file"), vocab_file);
  int64_t max_id = -1;
  for (const auto& m : members) max_id = std::max(max_id, m.second);
  if (members.empty() || max_id >= (int64_t{1} << 30)) {
    throw corruption("expected between 1 and 2^30 tokens with ids from 0, found " +
                         std::to_string(members.size()) + " tokens, largest id " +
                         std::to_string(max_id),
                     vocab_file);
  }
  t->tokens_.resize(static_cast<size_t>(max_id + 1));
  std::vector<bool> seen(t->tokens_.size());
  t->ids_.reserve(members.size());
  std::string bytes;
  for (const auto& [mapped, id] : members) {
    if (id < 0) throw corruption("token '" + mapped + "' has negative id", vocab_file);
    if (!byte_decoder.decode(mapped, &bytes)) {
      throw corruption("token '" + mapped +
                           "' is not written in GPT-2's byte alphabet "
                           "(bytes_to_unicode); the fix: use GPT-2's encoder.json",
                       vocab_file);
    }
    if (seen[id]) throw corruption("id " + std::to_string(id) + " is used twice", vocab_file);
    seen[id] = true;
    if (!t->ids_.emplace(bytes, static_cast<int32_t>(id)).second) {
      throw corruption("token '" + mapped + "' appears twice", vocab_file);
    }
    t->tokens_[id] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = t->ids_.find(std::string(1, static_cast<char>(b)));
    if (it == t->ids_.end()) {
      throw corruption(
          "no token for byte " + std::to_string(b) + "; a byte-level BPE vocabulary needs all 256",
          vocab_file);
    }
    t->byte_ids_[b] = it->second;
  }
  if (const auto it = t->ids_.find(kEodToken); it != t->ids_.end()) {
    t->eod_ = it->second;
  } else {
    throw corruption(std::string("no ") + kEodToken + " token", vocab_file);
  }

  // vocab.bpe: "#version: 0.2" then one "left right" merge per line, in rank order.
  const std::string merges_text = read_whole_file(merge_file, "merge file");
  std::istringstream lines(merges_text);
  std::string line, left, right;
  int line_no = 0;
  int32_t rank = 0;
  t->merges_.reserve(60000);
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const std::string where = merge_file + ":" + std::to_string(line_no);
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw corruption("expected two tokens separated by one space", where);
    }
    std::string parts[2] = {line.substr(0, space), line.substr(space + 1)};
    int32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      if (!byte_decoder.decode(parts[k], &bytes)) {
        throw corruption("'" + parts[k] + "' is not written in GPT-2's byte alphabet", where);
      }
      const auto it = t->ids_.find(bytes);
      if (it == t->ids_.end()) {
        throw corruption("'" + parts[k] + "' is not a token of " + vocab_file +
                             "; the fix: use the merge file that belongs to this vocabulary",
                         where);
      }
      ids[k] = it->second;
    }
    const auto merged = t->ids_.find(t->tokens_[ids[0]] + t->tokens_[ids[1]]);
    if (merged == t->ids_.end()) {
      throw corruption("the merge of '" + parts[0] + "' and '" + parts[1] + "' is not a token of " +
                           vocab_file +
                           "; the fix: use the merge file that belongs to this vocabulary",
                       where);
    }
    // A repeated pair keeps its first (lowest) rank, as Python's dict of ranks would not; GPT-2
    // has no repeats, so either choice gives the same ids.
    t->merges_.emplace(pair_key(ids[0], ids[1]), MergeRule{rank, merged->second});
    ++rank;
  }
  // No merges would silently tokenize byte by byte: several times the tokens, another model.
  if (rank == 0)
    throw corruption(
        "the merge file has no merges; the fix: pass GPT-2's vocab.bpe (data/gpt2/) "
        "or Megatron's gpt2-merges.txt",
        merge_file);
  return t;
}

std::string_view Gpt2Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return tokens_[id];
}

const Gpt2Tokenizer::MergeRule* Gpt2Tokenizer::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// BPE of one piece. GPT-2's loop (merge every occurrence of the lowest-ranked pair, left to
// right, then look again) in O(n log n): a linked list of symbols and a heap of candidate pairs
// keyed (rank, position). All candidates of the lowest rank are taken out together and merged
// in position order; pairs that a merge creates go back into the heap for the next rounds.
// Stale candidates (a side already merged away or changed) are skipped when they come out.
void Gpt2Tokenizer::bpe(std::string_view piece, Cache& cache, std::vector<int32_t>* ids) const {
  const int n = static_cast<int>(piece.size());
  auto& sym = cache.symbols;
  auto& next = cache.next;
  auto& prev = cache.prev;
  auto& heap = cache.heap;
  auto& batch = cache.batch;
  sym.resize(n);
  next.resize(n);
  prev.resize(n);
  heap.clear();
  const auto later = std::greater<uint64_t>();  // min-heap
  auto push_pair = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const MergeRule* rule = find_merge(sym[pos], sym[next[pos]])) {
      heap.push_back((static_cast<uint64_t>(rule->rank) << 32) | static_cast<uint32_t>(pos));
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int i = 0; i < n; ++i) {
    sym[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const uint64_t rank = heap.front() >> 32;
    batch.clear();
    while (!heap.empty() && (heap.front() >> 32) == rank) {
      std::pop_heap(heap.begin(), heap.end(), later);
      batch.push_back(heap.back());
      heap.pop_back();
    }
    // Popped lowest position first: left to right, as GPT-2 scans the word.
    for (const uint64_t entry : batch) {
      const int pos = static_cast<int>(entry & 0xFFFFFFFFu);
      if (sym[pos] < 0 || next[pos] < 0) continue;  // merged away, or now last
      const MergeRule* rule = find_merge(sym[pos], sym[next[pos]]);
      if (rule == nullptr || static_cast<uint64_t>(rule->rank) != rank) continue;  // changed
      const int right = next[pos];
      sym[pos] = rule->merged;
      sym[right] = -1;
      next[pos] = next[right];
      if (next[pos] >= 0) prev[next[pos]] = pos;
      push_pair(prev[pos]);
      push_pair(pos);
    }
  }
  for (int i = 0; i >= 0 && n > 0; i = next[i]) ids->push_back(sym[i]);
}

void Gpt2Tokenizer::encode(std::string_view text, Cache& cache, std::vector<int32_t>* ids) const {
  if (!is_valid_utf8(text)) {
    cache.replaced = replace_invalid_utf8(text);
    text = cache.replaced;
  }
  gpt2_pretokenize(text, cache.pretokenizer, &cache.pieces);
  for (const std::string_view piece : cache.pieces) {
    if (piece.size() == 1) {
      ids->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
      continue;
    }
    if (const auto it = cache.ids.find(piece); it != cache.ids.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      continue;
    }
    const size_t first = ids->size();
    bpe(piece, cache, ids);
    if (cache.ids.size() >= Cache::kMaxEntries) cache.ids.clear();
    cache.ids.emplace(std::string(piece), std::vector<int32_t>(ids->begin() + first, ids->end()));
  }
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  Cache cache;
  std::vector<int32_t> ids;
  encode(text, cache, &ids);
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || tokens_[id].empty()) {
      throw invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary (" +
                             std::to_string(vocab_size()) + " ids)");
    }
    out += tokens_[id];
  }
  return out;
}

}  // namespace mtnlg
