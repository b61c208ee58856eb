// IndexCache: index arrays (GPTDataset's document/sample/shuffle indices, BlendedDataset's
// blending indices) kept on disk so that a restart does not rebuild them, as Megatron-LM's
// megatron_dataset.py does.
//
// A cache entry is named by a 64-bit hash of its description, the JSON text of everything the
// arrays depend on (the dataset's contents hash, split range, seq_length, sample count, seed,
// shuffle flag, format version):
//   <dir>/<hash16>-<kind>-description.json   the description, written last: marks a complete entry
//   <dir>/<hash16>-<kind>-<array>.bin         one array each
// An array file is a 32-byte header, then the values (little endian):
//   "MTNLGIX1" | uint32 width (2, 4 or 8) | uint32 type (1 int16, 2 int32, 3 uint32, 4 int64;
//   0 in older files: signed of that width) | uint64 count | uint64 hash64 of the values
// Every file is written to a temporary name and renamed into place, so concurrent builders
// (several ranks of one node) and crashes never leave a half-written file under a final name.
// On load, a description that differs from the expected one (a hash collision, or a cache from
// another version) and an array whose header, size or checksum is wrong are corruption errors
// naming the file; the fix is deleting the cache directory.
//
// hash64 is FNV-1a over 64-bit little-endian words (the tail zero-padded, then the byte length
// mixed in): FNV's structure at memory speed, for a 2 GB .idx in about a second.
//
// Ownership: IndexCache holds only names. Not synchronized: one thread uses one IndexCache.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "data/gpt_indices.h"

namespace mtnlg {

uint64_t hash64(std::span<const uint8_t> bytes, uint64_t h = 0xcbf29ce484222325ull);
std::string hex64(uint64_t v);      // 16 lowercase hex digits
std::string json_double(double v);  // shortest text that reads back to v

// Builds a JSON object's text in insertion order: {"k": v, ...}.
class JsonText {
 public:
  JsonText& add(const std::string& key, const std::string& value);  // quoted and escaped
  JsonText& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonText& add(const std::string& key, int64_t value);
  JsonText& add(const std::string& key, uint64_t value);
  JsonText& add(const std::string& key, bool value);
  JsonText& add(const std::string& key, double value);                 // shortest round-trip form
  JsonText& add_raw(const std::string& key, const std::string& json);  // already JSON
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

class IndexCache {
 public:
  // `dir` empty disables the cache: present() is false and store/commit do nothing.
  IndexCache(std::string dir, std::string kind, std::string description);

  const std::string& description() const { return description_; }
  std::string path(const std::string& array) const;  // <dir>/<hash16>-<kind>-<array>.bin
  std::string description_path() const;

  // True when the entry's description file exists; throws corruption naming the file if its
  // text differs from the expected description.
  bool present() const;
  // Reads an array of a present entry; throws corruption naming the file if it is missing,
  // malformed, fails its checksum or does not hold `expected_size` values.
  IndexArray load(const std::string& array, int64_t expected_size) const;
  // Writes an array atomically (creating the directory; io_error naming data.cache_dir).
  void store(const std::string& array, const IndexArray& values) const;
  // Writes the description last, completing the entry.
  void commit() const;

 private:
  std::string dir_;
  std::string kind_;
  std::string description_;
  std::string stem_;  // <dir>/<hash16>-<kind>
};

}  // namespace mtnlg
