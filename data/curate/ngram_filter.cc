#include "data/curate/ngram_filter.h"

#include <algorithm>

namespace mtnlg::curate {

namespace {

uint64_t hash_ids(const int32_t* ids, int len) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(len);
  for (int i = 0; i < len; ++i) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(ids[i])) + 0x9E3779B97F4A7C15ull + (h << 6) +
         (h >> 2);
  }
  return h;
}

bool is_punct(char c) {
  return c == '.' || c == '!' || c == '?';
}

bool is_ascii(std::string_view s) {
  return ascii_run_end(s, 0) == s.size();
}

// The text as well-formed UTF-8: ill-formed bytes become U+FFFD, as the script's decoding does.
std::string well_formed(std::string_view utf8) {
  return is_valid_utf8(utf8) ? std::string(utf8) : replace_invalid_utf8(utf8);
}

}  // namespace

// A text of a scan and what the scan knows of it: its lower-cased form's words (ids, code-point
// positions and lengths), where its code points start in it and in the lowered text (made when a
// hit needs them), and whether its tails lower-case to the lowered text's tails. Each thread
// keeps one from document to document (allocating per document was a tenth of the time).
struct TaskNgrams::ScanText {
  std::string text, lowered;
  std::vector<int64_t> positions;
  std::vector<int32_t> ids, lengths;
  std::vector<int> known_until;  // [i]: the first word at or after i that no task has
  bool ascii = true;
  bool dotted_i = false;  // holds 'İ' (it lowers to two code points: the positions drift)
  int64_t size = 0;       // code points
  std::vector<uint32_t> at, lowered_at;  // [cp]: the first byte of code point cp ([size]: the end)
  bool have_offsets = false;

  static ScanText& mine() {
    thread_local ScanText s;
    return s;
  }
  void ensure_offsets() {
    if (ascii || have_offsets) return;
    const auto starts = [](const std::string& t, std::vector<uint32_t>* v) {
      v->clear();
      for (size_t i = 0; i < t.size(); ++i)
        if ((static_cast<unsigned char>(t[i]) & 0xC0) != 0x80)
          v->push_back(static_cast<uint32_t>(i));
      v->push_back(static_cast<uint32_t>(t.size()));
    };
    starts(text, &at);
    starts(lowered, &lowered_at);
    have_offsets = true;
  }
  size_t byte(int64_t cp) {
    ensure_offsets();
    return ascii ? static_cast<size_t>(cp) : at[static_cast<size_t>(cp)];
  }
  size_t lowered_byte(int64_t cp) {
    ensure_offsets();
    return ascii ? static_cast<size_t>(cp) : lowered_at[static_cast<size_t>(cp)];
  }
};

std::vector<TextWord> python_words(std::string_view lowered) {
  std::vector<TextWord> words;
  for_each_python_word(lowered, [&](const TextWord& w) { words.push_back(w); });
  return words;
}

// Inlined into the scan's word loop, with the bytes compared in place: a call per word and
// memcmp's call per equal hash were a fifth of the stage's time.
[[gnu::always_inline]] inline int32_t TaskNgrams::word_id(std::string_view w, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.tag != tag_of(h)) continue;
    const std::string_view known = word(s.id);
    if (known.size() != w.size()) continue;
    size_t k = 0;
    while (k < w.size() && known[k] == w[k]) ++k;
    if (k == w.size()) return s.id;
  }
}

int32_t TaskNgrams::add_word(std::string_view w, uint64_t h) {
  const int32_t known = word_id(w, h);
  if (known >= 0) return known;
  const auto id = static_cast<int32_t>(spans_.size());
  spans_.emplace_back(static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(w.size()));
  arena_ += w;
  hashes_.push_back(h);
  if (spans_.size() * 2 > slots_.size()) {  // grow: rehash every word
    slots_.assign(slots_.size() * 2, Slot{});
    for (size_t k = 0; k + 1 < spans_.size(); ++k) place(static_cast<int32_t>(k));
  }
  place(id);
  return id;
}

void TaskNgrams::place(int32_t id) {
  const size_t mask = slots_.size() - 1;
  size_t i = hashes_[static_cast<size_t>(id)] & mask;
  while (slots_[i].id >= 0) i = (i + 1) & mask;
  slots_[i] = Slot{tag_of(hashes_[static_cast<size_t>(id)]), id};
}

void TaskNgrams::add_task_text(std::string_view utf8) {
  std::string lowered;
  python_lower_utf8(well_formed(utf8), &lowered);
  const std::vector<TextWord> words = python_words(lowered);
  const int n = static_cast<int>(words.size());
  if (n < o_.min_ngram) return;
  std::vector<int32_t> ids(words.size());
  for (size_t i = 0; i < words.size(); ++i) ids[i] = add_word(words[i].bytes, words[i].hash);
  const size_t first_new = grams_.size();
  const auto insert = [&](int at, int len) {
    if (find(ids.data() + at, len) >= 0) return;
    const uint64_t h = hash_ids(ids.data() + at, len);
    index_[h].push_back(static_cast<int64_t>(grams_.size()));
    grams_.push_back({std::vector<int32_t>(ids.begin() + at, ids.begin() + at + len)});
    counts_.push_back(0);
    active_.push_back(1);
    if (std::find(lengths_.begin(), lengths_.end(), len) == lengths_.end()) {
      lengths_.push_back(len);
      std::sort(lengths_.begin(), lengths_.end());
    }
  };
  if (n < o_.max_ngram) insert(0, n);
  for (int i = 0; i + o_.max_ngram <= n; ++i) insert(i, o_.max_ngram);
  starts_.resize(spans_.size(), 0);
  for (size_t g = first_new; g < grams_.size(); ++g)
    starts_[static_cast<size_t>(grams_[g].words[0])] |= uint64_t{1} << grams_[g].words.size();
}

int64_t TaskNgrams::find(const int32_t* ids, int len) const {
  for (int i = 0; i < len; ++i)
    if (ids[i] < 0) return -1;  // a word no task text has
  const auto it = index_.find(hash_ids(ids, len));
  if (it == index_.end()) return -1;
  for (const int64_t g : it->second) {
    const std::vector<int32_t>& w = grams_[static_cast<size_t>(g)].words;
    if (active_[static_cast<size_t>(g)] && static_cast<int>(w.size()) == len &&
        std::equal(w.begin(), w.end(), ids))
      return g;
  }
  return -1;
}

std::string TaskNgrams::key(int64_t i) const {
  std::string k;
  for (const int32_t w : grams_[static_cast<size_t>(i)].words) {
    if (!k.empty()) k.push_back(' ');
    k += word(w);
  }
  return k;
}

void TaskNgrams::load(std::string text, ScanText* s) const {
  s->text = std::move(text);
  python_lower_utf8(s->text, &s->lowered);
  s->ids.clear();
  s->positions.clear();
  s->lengths.clear();
  for_each_python_word(s->lowered, [&](const TextWord& w) {
    s->ids.push_back(word_id(w.bytes, w.hash));
    s->positions.push_back(w.position);
    s->lengths.push_back(w.length);
  });
  const int n = static_cast<int>(s->ids.size());
  s->known_until.resize(s->ids.size() + 1);
  s->known_until[static_cast<size_t>(n)] = n;
  for (int i = n - 1; i >= 0; --i)
    s->known_until[static_cast<size_t>(i)] =
        s->ids[static_cast<size_t>(i)] < 0 ? i : s->known_until[static_cast<size_t>(i) + 1];
  s->ascii = is_ascii(s->text);
  s->dotted_i = !s->ascii && s->text.find("\xC4\xB0") != std::string::npos;
  s->have_offsets = false;
  if (s->ascii) {
    s->size = static_cast<int64_t>(s->text.size());
  } else {
    s->size = 0;
    for (const char c : s->text) s->size += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }
}

// The script keeps a FIFO of texts, but each text adds at most one to it (counting: the rest
// after a hit; cleaning: the part after the cut), so a scan is a chain of tails of the first
// text. A tail from code point c on lower-cases to the lowered text's tail from L(c) on (L(c): c
// plus the 'İ's before c, each of which lowers to two code points), but for a rare final sigma
// (python_lower_tail_matches). Its words are then the lowered text's from the first one ending
// after L(c) (a word the cut splits keeps its tail), at positions less L(c): the text is
// lower-cased and split into words once, not once per hit (a document holding many task
// passages was scanned over and over). Where the tail differs, it is taken as a new text.
void TaskNgrams::scan(std::string first, bool counting, std::vector<int64_t>* hits,
                      std::vector<std::string>* pieces) const {
  ScanText& s = ScanText::mine();
  load(std::move(first), &s);
  int64_t off = 0;    // the current text is s.text from code point off
  int64_t off_l = 0;  // which lowers to s.lowered from code point off_l
  size_t b = 0;       // its first word
  const int max = o_.max_ngram;
  while (true) {
    const int n = static_cast<int>(s.ids.size() - b);
    const int64_t size = s.size - off;
    int64_t next = -1;  // where the next text starts (code points from off), if any
    // A hit at word `at` (of the current text) of `len` words: check_and_clean_text.
    const auto hit = [&](int at, int len) {
      const auto w = static_cast<size_t>(at) + b;
      if (s.known_until[w] < static_cast<int>(w) + len) return false;  // a word no task has
      if (len >= 64 || !(starts_[static_cast<size_t>(s.ids[w])] >> len & 1))
        return false;  // no n-gram of this length starts with this word
      const int64_t g = find(s.ids.data() + w, len);
      if (g < 0) return false;
      if (counting && std::find(hits->begin(), hits->end(), g) == hits->end()) hits->push_back(g);
      // The key's length: the words joined by single spaces.
      int64_t key_len = len - 1;
      for (size_t k = w; k < w + static_cast<size_t>(len); ++k) key_len += s.lengths[k];
      // The word's position in the lowered text indexes the text itself, as in the script.
      const int64_t start = s.positions[w] - off_l;
      if (counting) {
        if (start + key_len + 1 < size) next = start + key_len + 1;
        return true;
      }
      // split_text. The punctuation is ASCII: a code point is one when its first byte is.
      const auto punct = [&](int64_t cp) { return is_punct(s.text[s.byte(off + cp)]); };
      int64_t pos = start - o_.remove_char_each_side;  // position 0 itself is never a cut
      while (pos > 0 && pos < size && !punct(pos)) --pos;
      // The pieces' lengths in code points decide whether they are kept.
      if (pos > 0 && std::min(pos + 1, size) > o_.filter_text_char_len) {
        const size_t from = s.byte(off);
        pieces->push_back(s.text.substr(from, s.byte(off + std::min(pos + 1, size)) - from));
      }
      pos = start + key_len + o_.remove_char_each_side;
      while (pos < size && !punct(pos)) ++pos;
      if (pos + 1 < size && size - (pos + 1) > o_.filter_text_char_len) next = pos + 1;
      return true;
    };
    bool free = true;
    for (int i = 0; free && i + max <= n; ++i) {
      if (hit(i, max)) {
        free = false;
        break;
      }
      for (const int len : lengths_)
        if (hit(i, len)) {
          free = false;
          break;
        }
    }
    if (free && n - max > 0) {
      const int last = n - max;
      for (const int len : lengths_) {
        if (len == max) continue;
        for (int j = 0; free && j + len <= max; ++j)
          if (hit(last + j, len)) free = false;
        if (!free) break;
      }
    }
    if (free) {
      if (!counting) pieces->push_back(s.text.substr(s.byte(off)));
      return;
    }
    if (next < 0) return;
    const int64_t c = off + next;
    const size_t c_byte = s.byte(c);
    if (!python_lower_tail_matches(s.text, c_byte)) {
      load(s.text.substr(c_byte), &s);
      off = off_l = 0;
      b = 0;
      continue;
    }
    int64_t c_l = off_l + next;
    if (s.dotted_i) {
      const std::string_view between(s.text.data() + s.byte(off), c_byte - s.byte(off));
      for (size_t k = between.find("\xC4\xB0"); k != std::string_view::npos;
           k = between.find("\xC4\xB0", k + 2))
        ++c_l;
    }
    off = c;
    off_l = c_l;
    while (b < s.ids.size() && s.positions[b] + s.lengths[b] <= c_l) ++b;
    if (b < s.ids.size() && s.positions[b] < c_l) {  // the cut splits word b: its tail is a word
      const size_t from = s.lowered_byte(c_l);
      const std::string_view tail(s.lowered.data() + from,
                                  s.lowered_byte(s.positions[b] + s.lengths[b]) - from);
      s.ids[b] = word_id(tail, word_hash(tail));
      s.lengths[b] -= static_cast<int32_t>(c_l - s.positions[b]);
      s.positions[b] = c_l;
      s.known_until[b] = s.ids[b] < 0 ? static_cast<int>(b) : s.known_until[b + 1];
    }
  }
}

std::vector<int64_t> TaskNgrams::hits(std::string_view utf8) const {
  std::vector<int64_t> h;
  scan(well_formed(utf8), true, &h, nullptr);
  return h;
}

void TaskNgrams::index_starts() {
  starts_.assign(spans_.size(), 0);
  for (size_t g = 0; g < grams_.size(); ++g) {
    const std::vector<int32_t>& w = grams_[g].words;
    if (active_[g] && w.size() < 64) starts_[static_cast<size_t>(w[0])] |= uint64_t{1} << w.size();
  }
}

void TaskNgrams::count(const std::vector<int64_t>& hits) {
  for (const int64_t g : hits) ++counts_[static_cast<size_t>(g)];
}

void TaskNgrams::keep_below_threshold() {
  lengths_.clear();
  for (size_t g = 0; g < grams_.size(); ++g) {
    active_[g] = counts_[g] < o_.key_threshold;
    const int len = static_cast<int>(grams_[g].words.size());
    if (active_[g] && std::find(lengths_.begin(), lengths_.end(), len) == lengths_.end())
      lengths_.push_back(len);
  }
  std::sort(lengths_.begin(), lengths_.end());
  index_starts();
}

int64_t TaskNgrams::active() const {
  int64_t n = 0;
  for (const char a : active_) n += a;
  return n;
}

std::vector<std::string> TaskNgrams::clean(std::string_view utf8) const {
  std::vector<std::string> pieces;
  scan(well_formed(utf8), false, nullptr, &pieces);
  return pieces;
}

}  // namespace mtnlg::curate
