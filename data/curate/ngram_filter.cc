#include "data/curate/ngram_filter.h"

#include <algorithm>
#include <deque>
#include <set>

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

bool is_punct(char32_t c) { return c == '.' || c == '!' || c == '?'; }

}  // namespace

namespace {

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  return k ^ (k >> 33);
}

}  // namespace

uint64_t word_hash(std::u32string_view w) {
  uint64_t h = kFnvBasis;
  for (const char32_t c : w) h = (h ^ c) * kFnvPrime;
  return fmix64(h);
}

void python_words(const std::u32string& lowered, std::vector<std::u32string_view>* words,
                  std::vector<int64_t>* positions, std::vector<uint64_t>* hashes) {
  words->clear();
  positions->clear();
  if (hashes != nullptr) hashes->clear();
  // About one word in six code points in prose: one allocation instead of a doubling series.
  words->reserve(lowered.size() / 6 + 1);
  positions->reserve(lowered.size() / 6 + 1);
  if (hashes != nullptr) hashes->reserve(lowered.size() / 6 + 1);
  const char32_t* t = lowered.data();
  const size_t n = lowered.size();
  size_t i = 0;
  while (true) {
    while (i < n && !python_word_char(t[i])) ++i;
    if (i == n) break;
    uint64_t h = kFnvBasis;
    size_t j = i;
    while (j < n && python_word_char(t[j])) h = (h ^ t[j++]) * kFnvPrime;
    words->emplace_back(t + i, j - i);
    positions->push_back(static_cast<int64_t>(i));
    if (hashes != nullptr) hashes->push_back(fmix64(h));
    i = j;
  }
}

int32_t TaskNgrams::word_id(std::u32string_view w, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.hash == h && word(s.id) == w) return s.id;
  }
}

int32_t TaskNgrams::add_word(std::u32string_view w, uint64_t h) {
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
  slots_[i] = Slot{hashes_[static_cast<size_t>(id)], id};
}

void TaskNgrams::add_task_text(std::string_view utf8) {
  std::vector<std::u32string_view> words;
  std::vector<int64_t> positions;
  std::vector<uint64_t> hashes;
  const std::u32string lowered = python_lower(utf8_to_u32(utf8));
  python_words(lowered, &words, &positions, &hashes);
  const int n = static_cast<int>(words.size());
  if (n < o_.min_ngram) return;
  std::vector<int32_t> ids(words.size());
  for (size_t i = 0; i < words.size(); ++i) ids[i] = add_word(words[i], hashes[i]);
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
  std::u32string k;
  for (const int32_t w : grams_[static_cast<size_t>(i)].words) {
    if (!k.empty()) k.push_back(U' ');
    k += word(w);
  }
  return u32_to_utf8(k);
}

void TaskNgrams::scan(std::u32string first, bool counting, std::vector<int64_t>* hits,
                      std::vector<std::u32string>* pieces) const {
  std::deque<std::u32string> buf;
  buf.push_back(std::move(first));
  std::vector<std::u32string_view> words;
  std::vector<int64_t> positions;
  std::vector<uint64_t> hashes;
  std::vector<int32_t> ids;
  std::vector<int> known_until;  // [i]: the first word at or after i that no task has
  const int max = o_.max_ngram;
  while (!buf.empty()) {
    const std::u32string text = std::move(buf.front());
    buf.pop_front();
    const std::u32string lowered = python_lower(text);
    python_words(lowered, &words, &positions, &hashes);
    const int n = static_cast<int>(words.size());
    ids.resize(words.size());
    known_until.resize(words.size() + 1);
    known_until[static_cast<size_t>(n)] = n;
    for (int i = n - 1; i >= 0; --i) {
      ids[static_cast<size_t>(i)] =
          word_id(words[static_cast<size_t>(i)], hashes[static_cast<size_t>(i)]);
      known_until[static_cast<size_t>(i)] =
          ids[static_cast<size_t>(i)] < 0 ? i : known_until[static_cast<size_t>(i) + 1];
    }
    // A hit at word `at` of `len` words: what the script's check_and_clean_text does.
    const auto hit = [&](int at, int len) {
      if (known_until[static_cast<size_t>(at)] < at + len) return false;  // a word no task has
      if (len >= 64 || !(starts_[static_cast<size_t>(ids[static_cast<size_t>(at)])] >> len & 1))
        return false;  // no n-gram of this length starts with this word
      const int64_t g = find(ids.data() + at, len);
      if (g < 0) return false;
      // The key's length: the words joined by single spaces.
      int64_t key_len = len - 1;
      for (int k = at; k < at + len; ++k) key_len += static_cast<int64_t>(words[static_cast<size_t>(k)].size());
      const int64_t start = positions[static_cast<size_t>(at)];
      const auto size = static_cast<int64_t>(text.size());
      if (counting) {
        if (std::find(hits->begin(), hits->end(), g) == hits->end()) hits->push_back(g);
        if (start + key_len + 1 < size) buf.push_back(text.substr(static_cast<size_t>(start + key_len + 1)));
        return true;
      }
      // split_text: back from 200 before the hit to a '.', '!' or '?' (exclusive of position 0).
      int64_t pos = start - o_.remove_char_each_side;
      while (pos > 0 && pos < size && !is_punct(text[static_cast<size_t>(pos)])) --pos;
      std::u32string before, after;
      if (pos > 0) before = text.substr(0, static_cast<size_t>(std::min(pos + 1, size)));
      pos = start + key_len + o_.remove_char_each_side;
      while (pos < size && !is_punct(text[static_cast<size_t>(pos)])) ++pos;
      if (pos + 1 < size) after = text.substr(static_cast<size_t>(pos + 1));
      if (static_cast<int64_t>(before.size()) > o_.filter_text_char_len)
        pieces->push_back(std::move(before));
      if (static_cast<int64_t>(after.size()) > o_.filter_text_char_len)
        buf.push_back(std::move(after));
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
    if (free && !counting) pieces->push_back(text);
  }
}

std::vector<int64_t> TaskNgrams::hits(std::string_view utf8) const {
  std::vector<int64_t> h;
  scan(utf8_to_u32(utf8), true, &h, nullptr);
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
  std::vector<std::u32string> pieces;
  scan(utf8_to_u32(utf8), false, nullptr, &pieces);
  std::vector<std::string> out;
  for (const std::u32string& p : pieces) out.push_back(u32_to_utf8(p));
  return out;
}

}  // namespace mtnlg::curate
