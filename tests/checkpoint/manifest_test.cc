// The manifest: a round trip of every field, and the errors a damaged or newer one gives.
#include <catch2/catch.hpp>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "checkpoint/shard_io.h"
#include "core/status.h"

using namespace mtnlg;

namespace {

CheckpointManifest sample() {
  CheckpointManifest m;
  m.iteration = 100;
  m.consumed_samples = 800;
  m.consumed_tokens = 102400;
  m.valid_consumed_samples = 32;
  m.optimizer_steps = 100;
  m.lr = 2.9e-4;
  m.global_batch_size = 8;
  m.seed = 18446744073709551615ULL;  // the full uint64 range survives
  m.data_seed = 7;
  m.next_micro_batch_id = 200;
  m.tensor = 2;
  m.pipeline = 4;
  m.data = 3;
  m.zero_stage = 1;
  m.micro_batch_size = 4;
  m.model = ManifestModel{4, 64, 4, 256, 32, 32, 500, 512};
  m.files = {{"model_tp00_pp000.safetensors", 1234, 0x0123456789abcdefULL},
             {"optim_tp00_pp000_dp000.safetensors", 99, 0xfedcba9876543210ULL}};
  // The rest of the shards the layout writes (the manifest lists exactly those).
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t p = 0; p < 4; ++p) {
      if (t || p) m.files.push_back({model_file_name(t, p), 1, 0});
      for (int64_t d = 0; d < 3; ++d)
        if (t || p || d) m.files.push_back({optim_file_name(t, p, d), 1, 0});
    }
  m.recipe_yaml = "model:\n  num_layers: 4\n  \"quoted\": \\\\ \t\n";
  return m;
}

std::string error_of(const std::string& text) {
  try {
    parse_manifest(text, "/ck/iter_0000100/manifest.json");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kCorruption);
    CHECK(e.context() == "/ck/iter_0000100/manifest.json");
    return e.message();
  }
  FAIL("parsed: " << text);
  return "";
}

}  // namespace

TEST_CASE("manifest round trip keeps every field") {
  const CheckpointManifest a = sample();
  const CheckpointManifest b = parse_manifest(manifest_to_json(a), "m");
  CHECK(b.format_version == kCheckpointFormatVersion);
  CHECK(b.iteration == a.iteration);
  CHECK(b.consumed_samples == a.consumed_samples);
  CHECK(b.consumed_tokens == a.consumed_tokens);
  CHECK(b.valid_consumed_samples == a.valid_consumed_samples);
  CHECK(b.optimizer_steps == a.optimizer_steps);
  CHECK(b.lr == a.lr);
  CHECK(b.global_batch_size == a.global_batch_size);
  CHECK(b.seed == a.seed);
  CHECK(b.data_seed == a.data_seed);
  CHECK(b.next_micro_batch_id == a.next_micro_batch_id);
  CHECK(b.tensor == 2);
  CHECK(b.pipeline == 4);
  CHECK(b.data == 3);
  CHECK(b.zero_stage == 1);
  CHECK(b.micro_batch_size == 4);
  CHECK(b.model.vocab_size == 500);
  CHECK(b.model.padded_vocab_size == 512);
  REQUIRE(b.files.size() == 32);
  CHECK(b.files[0].name == a.files[0].name);
  CHECK(b.files[0].bytes == 1234);
  CHECK(b.files[0].xxh3 == 0x0123456789abcdefULL);
  CHECK(b.files[1].xxh3 == 0xfedcba9876543210ULL);
  CHECK(b.recipe_yaml == a.recipe_yaml);
}

TEST_CASE(
    "a newer format, a missing field, a bad checksum or file name are errors naming the file") {
  std::string text = manifest_to_json(sample());
  SECTION("newer") {
    const auto at = text.find("\"format_version\": 1");
    text.replace(at, 19, "\"format_version\": 7");
    CHECK_THAT(error_of(text), Catch::Contains("format_version 7") && Catch::Contains("newer one"));
  }
  SECTION("missing field") {
    const auto at = text.find("\"consumed_samples\": 800, ");
    text.erase(at, 25);
    CHECK_THAT(error_of(text), Catch::Contains("\"consumed_samples\""));
  }
  SECTION("mistyped field") {
    const auto at = text.find("\"iteration\": 100");
    text.replace(at, 16, "\"iteration\": \"a\"");
    CHECK_THAT(error_of(text), Catch::Contains("iteration") && Catch::Contains("expected"));
  }
  SECTION("checksum text") {
    const auto at = text.find("xxh3:0123");
    text.replace(at, 9, "md5:01234");
    CHECK_THAT(error_of(text), Catch::Contains("xxh3"));
  }
  SECTION("a path as a file name - only the tokenizer's folder is allowed") {
    const std::string name = "model_tp00_pp000.safetensors";
    const auto at = text.find(name);
    for (const char* bad : {"../x/model", "tokenizer/", "tokenizer/.x", "tokenizer/../x",
                            "tokenizers/x", "/etc/passwd", "tokenizer/a/b"}) {
      std::string t = text;
      t.replace(at, name.size(), bad);
      CHECK_THAT(error_of(t), Catch::Contains("not a file name"));
    }
    // A name in the tokenizer's folder is a file name (the layout check then misses the shard).
    text.replace(at, name.size(), "tokenizer/vocab.json");
    CHECK_THAT(error_of(text),
               !Catch::Contains("not a file name") && Catch::Contains("does not list"));
  }
  SECTION("truncated") {
    CHECK_FALSE(error_of(text.substr(0, text.size() / 2)).empty());
  }
}

TEST_CASE("checksum text round trip") {
  uint64_t v = 0;
  CHECK(checksum_text(0xabcULL) == "xxh3:0000000000000abc");
  CHECK(parse_checksum_text("xxh3:0000000000000abc", &v));
  CHECK(v == 0xabcULL);
  CHECK_FALSE(parse_checksum_text("xxh3:0000000000000abg", &v));
  CHECK_FALSE(parse_checksum_text("xxh3:abc", &v));
}

TEST_CASE("a manifest is checked against itself, its directory and its layout") {
  const std::string path = "/ck/iter_0000100/manifest.json";
  const auto error_of_manifest = [&](const CheckpointManifest& m) -> std::string {
    try {
      validate_manifest(m, path);
    } catch (const Error& e) {
      CHECK(e.code() == Code::kCorruption);
      return e.message();
    }
    return "";
  };
  CHECK(error_of_manifest(sample()).empty());
  CheckpointManifest m = sample();
  m.iteration = 99;
  CHECK_THAT(error_of_manifest(m), Catch::Contains("says iteration 99 but lies in iter_0000100"));
  m = sample();
  m.model.num_layers = -2;
  CHECK_THAT(error_of_manifest(m),
             Catch::Contains("model is impossible") && Catch::Contains("model.num_layers"));
  m = sample();
  m.model.hidden_size = 1000000000000000000;
  CHECK_THAT(error_of_manifest(m), Catch::Contains("model.hidden_size"));
  m = sample();
  m.tensor = 0;
  CHECK_THAT(error_of_manifest(m), Catch::Contains("layout.tensor is 0"));
  m = sample();
  m.tensor = 3;  // 4 heads
  CHECK_THAT(error_of_manifest(m), Catch::Contains("does not divide its model"));
  m = sample();
  m.model.padded_vocab_size = 499;
  CHECK_THAT(error_of_manifest(m), Catch::Contains("padded_vocab_size 499"));
  m = sample();
  m.files.clear();
  CHECK_THAT(error_of_manifest(m), Catch::Contains("does not list model_tp00_pp000"));
  m = sample();
  m.files.push_back(m.files[0]);
  CHECK_THAT(error_of_manifest(m), Catch::Contains("lists model_tp00_pp000.safetensors twice"));
  m = sample();
  m.files.push_back({model_file_name(2, 0), 1, 0});
  CHECK_THAT(error_of_manifest(m), Catch::Contains("has no place for"));
  m = sample();
  m.files.push_back({"tokenizer/vocab.json", 10, 0});
  CHECK(error_of_manifest(m).empty());
}
