#include "checkpoint/tokenizer_files.h"

#include <filesystem>

#include "checkpoint/file_io.h"
#include "core/input_file.h"
#include "core/status.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

constexpr const char* kVocab = "vocab.json";
constexpr const char* kMerges = "merges.txt";
constexpr const char* kConfig = "tokenizer_config.json";

uint64_t xxh3_of(const std::string& bytes) {
  Checksum sum;
  sum.update(bytes.data(), bytes.size());
  return sum.digest();
}

}  // namespace

std::vector<ManifestFile> write_tokenizer_files(const std::string& dir, const std::string& base,
                                                const TokenizerFiles& source,
                                                int64_t model_max_length) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw io_error("cannot create: " + ec.message(), dir);
  const std::string config =
      "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"model_max_length\": " +
      std::to_string(model_max_length) +
      ",\n  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
      "  \"unk_token\": \"<|endoftext|>\",\n  \"add_prefix_space\": false\n}\n";
  const std::pair<const char*, std::string> files[] = {
      {kVocab, read_input_file(source.vocab_file)},
      {kMerges, read_input_file(source.merge_file)},
      {kConfig, config},
  };
  std::vector<ManifestFile> out;
  const fs::path rel = fs::relative(dir, base, ec);
  for (const auto& [name, bytes] : files) {
    write_file_atomic((fs::path(dir) / name).string(), bytes);
    out.push_back(ManifestFile{(rel / name).generic_string(), static_cast<int64_t>(bytes.size()),
                               xxh3_of(bytes)});
  }
  return out;
}

std::optional<TokenizerFiles> checkpoint_tokenizer(const std::string& checkpoint_dir) {
  const fs::path dir = fs::path(checkpoint_dir) / kTokenizerDir;
  std::error_code ec;
  if (!fs::is_regular_file(dir / kVocab, ec) || !fs::is_regular_file(dir / kMerges, ec))
    return std::nullopt;
  return TokenizerFiles{(dir / kVocab).string(), (dir / kMerges).string()};
}

bool is_shard_file(const ManifestFile& f) {
  const std::string_view n = f.name;
  return n.find('/') == std::string_view::npos && n.size() > 12 &&
         n.substr(n.size() - 12) == ".safetensors";
}

void verify_other_files(const std::string& checkpoint_dir, const CheckpointManifest& m) {
  for (const ManifestFile& f : m.files) {
    if (is_shard_file(f)) continue;
    const std::string path = (fs::path(checkpoint_dir) / f.name).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw not_found("the checkpoint's file is missing (the manifest lists it); restore it", path);
    const std::string bytes = read_input_file(path);
    if (static_cast<int64_t>(bytes.size()) != f.bytes)
      throw corruption("the file is " + std::to_string(bytes.size()) +
                           " bytes but the manifest "
                           "says " +
                           std::to_string(f.bytes) + "; restore it",
                       path);
    if (xxh3_of(bytes) != f.xxh3)
      throw corruption("the file's checksum is " + checksum_text(xxh3_of(bytes)) +
                           " but the manifest says " + checksum_text(f.xxh3) + "; restore it",
                       path);
  }
}

}  // namespace mtnlg
