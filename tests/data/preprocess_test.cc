#include "data/preprocess.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "core/status.h"
#include "data/gpt2_tokenizer.h"
#include "data/indexed_dataset.h"
#include "test_util.h"

namespace mtnlg {
namespace {

PreprocessOptions options(const test::TempDir& dir, const std::string& input_text,
                          InputFormat format = InputFormat::kJsonl) {
  const std::string input = dir.file(format == InputFormat::kJsonl ? "in.jsonl" : "in.txt");
  test::write_file(input, input_text);
  PreprocessOptions opt;
  opt.input = input;
  opt.format = format;
  opt.output_prefix = dir.file("out");
  opt.vocab_file = test::source_path("data/gpt2/encoder.json");
  opt.merge_file = test::source_path("data/gpt2/vocab.bpe");
  opt.progress = ProgressMode::kNone;
  return opt;
}

std::shared_ptr<const Gpt2Tokenizer> gpt2() {
  return Gpt2Tokenizer::load(test::source_path("data/gpt2/encoder.json"),
                             test::source_path("data/gpt2/vocab.bpe"));
}

// The documents of PREFIX, each as its token ids.
std::vector<std::vector<int32_t>> read_documents(const std::string& prefix) {
  const auto ds = IndexedDataset::open(prefix);
  std::vector<std::vector<int32_t>> docs;
  for (int64_t i = 0; i < ds->num_sequences(); ++i) {
    std::vector<int32_t> ids(static_cast<size_t>(ds->sequence_length(i)));
    ds->read(i, 0, static_cast<int64_t>(ids.size()), ids.data());
    docs.push_back(std::move(ids));
  }
  return docs;
}

std::vector<std::string> files_in(const test::TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("preprocess round-trips jsonl documents with every escape", "[preprocess]") {
  test::TempDir dir;
  const std::string jsonl =
      "{\"text\": \"Hello world\"}\n"
      "\n"
      "{\"id\": 7, \"meta\": {\"a\": [1, 2.5e3, null, true, \"x\"]}, \"text\": "
      "\"tab\\tnl\\nq\\\"b\\\\s\\/\"}\n"
      "{\"text\": \"caf\\u00e9 \\ud83d\\ude00 \\u65e5\\u672c \\u0000nul\"}\r\n"
      "{\"text\": \"lone \\ud800 surrogate\"}\n"
      "   \n"
      "{\"text\": \"raw UTF-8: na\xC3\xAFve \xF0\x9F\x91\x8D\"}";  // no final newline
  const std::vector<std::string> want = {
      "Hello world", "tab\tnl\nq\"b\\s/",
      std::string("caf\xC3\xA9 \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC \0nul", 22),
      "lone \xEF\xBF\xBD surrogate", "raw UTF-8: na\xC3\xAFve \xF0\x9F\x91\x8D"};
  const auto tok = gpt2();
  for (const bool eod : {false, true}) {
    PreprocessOptions opt = options(dir, jsonl);
    opt.append_eod = eod;
    const PreprocessStats stats = preprocess(opt);
    CHECK(stats.documents == 5);
    CHECK(stats.token_type == TokenType::kUInt16);
    const auto docs = read_documents(opt.output_prefix);
    REQUIRE(docs.size() == want.size());
    int64_t tokens = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      INFO("document " << i << " eod " << eod);
      std::vector<int32_t> ids = docs[i];
      if (eod) {
        REQUIRE(!ids.empty());
        CHECK(ids.back() == tok->eod());
        ids.pop_back();
      }
      CHECK(tok->decode(ids) == want[i]);
      CHECK(ids == tok->encode(want[i]));
      tokens += static_cast<int64_t>(docs[i].size());
    }
    CHECK(stats.tokens == tokens);
  }
}

TEST_CASE("preprocess reads text files as blank-line separated blocks", "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir,
                                  "\n\npara one\nline two\n\n\n  \t\npara two\r\n\r\n"
                                  "last block\nno final newline",
                                  InputFormat::kText);
  opt.append_eod = true;
  const PreprocessStats stats = preprocess(opt);
  CHECK(stats.documents == 3);
  const auto tok = gpt2();
  const auto docs = read_documents(opt.output_prefix);
  REQUIRE(docs.size() == 3);
  const std::vector<std::string> want = {"para one\nline two\n", "para two\r\n",
                                         "last block\nno final newline"};
  for (size_t i = 0; i < 3; ++i) {
    CHECK(docs[i].back() == 50256);
    CHECK(tok->decode(std::span(docs[i]).first(docs[i].size() - 1)) == want[i]);
  }
}

TEST_CASE("preprocess stops at a bad line - naming it - and leaves nothing behind",
          "[preprocess]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n", "in.jsonl:3"},
      {"{\"text\": \"ok\"}\n{\"body\": \"no text key\"}\n", "in.jsonl:2"},
      {"\n\n{\"text\": [\"not\", \"a string\"]}\n", "in.jsonl:3"},
      {"{\"text\": \"ok\"}\n{\"text\": \"x\"},\n", "in.jsonl:2"},
      {"[1, 2]\n", "in.jsonl:1"},
  };
  for (const auto& [input, where] : bad) {
    test::TempDir dir;
    PreprocessOptions opt = options(dir, input);
    opt.workers = 2;
    INFO(input);
    try {
      preprocess(opt);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kInvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(where));
      CHECK_THAT(e.what(), Catch::Contains("--skip-bad-lines"));
    }
    CHECK(files_in(dir) == std::vector<std::string>{"in.jsonl"});  // no output, no temp files
  }
}

TEST_CASE("preprocess --skip-bad-lines skips and counts bad lines", "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir,
                                  "{\"text\": \"one\"}\n{bad json\n{\"text\": 3}\n"
                                  "{\"text\": \"two\"}\n{\"other\": \"x\"}\n{\"text\": \"\"}\n");
  opt.skip_bad_lines = true;
  const PreprocessStats stats = preprocess(opt);
  CHECK(stats.skipped_lines == 3);
  CHECK(stats.documents == 3);        // the empty one is recorded, as Megatron records it
  CHECK(stats.empty_documents == 1);  // "" has no tokens
  const auto tok = gpt2();
  const auto docs = read_documents(opt.output_prefix);
  REQUIRE(docs.size() == 2);
  CHECK(tok->decode(docs[0]) == "one");
  CHECK(tok->decode(docs[1]) == "two");
}

TEST_CASE("preprocess reports missing files and keeps an existing dataset on error",
          "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir, "{\"text\": \"first\"}\n");
  preprocess(opt);
  const std::string bin = test::read_file(opt.output_prefix + ".bin");

  test::write_file(opt.input, "{\"text\": \"second\"}\n{oops\n");
  CHECK_THROWS_AS(preprocess(opt), Error);
  CHECK(test::read_file(opt.output_prefix + ".bin") == bin);  // the old dataset is untouched
  CHECK(files_in(dir) == std::vector<std::string>{"in.jsonl", "out.bin", "out.idx"});

  PreprocessOptions missing = opt;
  missing.input = dir.file("nope.jsonl");
  try {
    preprocess(missing);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK_THAT(e.what(), Catch::Contains("nope.jsonl"));
  }
  PreprocessOptions no_dir = opt;
  no_dir.output_prefix = dir.file("no/such/dir/out");
  CHECK_THROWS_AS(preprocess(no_dir), Error);
  PreprocessOptions no_vocab = opt;
  no_vocab.vocab_file = dir.file("encoder.json");
  CHECK_THROWS_AS(preprocess(no_vocab), Error);
}

// A few MB of jsonl mixing words, digits, whitespace and non-ASCII text.
std::string random_corpus(int documents) {
  std::mt19937 rng(42);
  const std::vector<std::string> words = {"the",
                                          "The",
                                          " and",
                                          "of",
                                          "LORD",
                                          "said",
                                          "unto",
                                          "him",
                                          "caf\xC3\xA9",
                                          "\xE6\x97\xA5\xE6\x9C\xAC",
                                          "42",
                                          "\xD9\xA3",
                                          "it's",
                                          "\\n",
                                          "\\t",
                                          "\\u00e9",
                                          "\\ud83d\\ude00",
                                          "\\\"q\\\"",
                                          ",",
                                          ".",
                                          "    ",
                                          "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"};
  std::string out;
  for (int d = 0; d < documents; ++d) {
    out += "{\"id\": " + std::to_string(d) + ", \"text\": \"";
    const int n = static_cast<int>(rng() % 400);
    for (int w = 0; w < n; ++w) {
      out += words[rng() % words.size()];
      if (rng() % 3 != 0) out += ' ';
    }
    out += "\"}\n";
  }
  return out;
}

TEST_CASE("preprocess writes the same bytes with 1 and 4 workers", "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir, random_corpus(3000));
  opt.append_eod = true;
  opt.chunk_bytes = 16 << 10;  // many chunks, so workers finish out of order
  opt.workers = 1;
  opt.output_prefix = dir.file("one");
  const PreprocessStats one = preprocess(opt);
  opt.workers = 4;
  opt.output_prefix = dir.file("four");
  const PreprocessStats four = preprocess(opt);
  CHECK(one.documents == 3000);
  CHECK(four.documents == one.documents);
  CHECK(four.tokens == one.tokens);
  CHECK(test::read_file(dir.file("one.bin")) == test::read_file(dir.file("four.bin")));
  CHECK(test::read_file(dir.file("one.idx")) == test::read_file(dir.file("four.idx")));
}

TEST_CASE("preprocess rejects bad options", "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir, "{\"text\": \"x\"}\n");
  opt.workers = 0;
  CHECK_THROWS_AS(preprocess(opt), Error);
  opt.workers = 1;
  opt.json_key = "";
  CHECK_THROWS_AS(preprocess(opt), Error);
}

}  // namespace
}  // namespace mtnlg

namespace mtnlg {
namespace {

// A dataset's documents, each as its sequences' token ids.
std::vector<std::vector<std::vector<int32_t>>> read_structure(const std::string& prefix) {
  const auto ds = IndexedDataset::open(prefix);
  std::vector<std::vector<std::vector<int32_t>>> docs(static_cast<size_t>(ds->num_documents()));
  for (int64_t d = 0; d < ds->num_documents(); ++d)
    for (int64_t s = ds->document_index(d); s < ds->document_index(d + 1); ++s) {
      std::vector<int32_t> ids(static_cast<size_t>(ds->sequence_length(s)));
      ds->read(s, 0, static_cast<int64_t>(ids.size()), ids.data());
      docs[static_cast<size_t>(d)].push_back(std::move(ids));
    }
  return docs;
}

}  // namespace

// Megatron's preprocess_data.py: empty text gives a document of no sequences and no <EOD> (with
// --append-eod too); the document is still recorded, so document ids line up with the input.
TEST_CASE("preprocess records an empty document with no tokens as Megatron does", "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(dir, "{\"text\": \"a\"}\n{\"text\": \"\"}\n{\"text\": \"b\"}\n");
  opt.append_eod = true;
  const PreprocessStats stats = preprocess(opt);
  CHECK(stats.documents == 3);
  CHECK(stats.sequences == 2);
  CHECK(stats.empty_documents == 1);
  const auto docs = read_structure(opt.output_prefix);
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].size() == 1);
  CHECK(docs[1].empty());
  CHECK(docs[2].size() == 1);
  CHECK(docs[0][0].back() == 50256);
  const auto ds = IndexedDataset::open(opt.output_prefix);
  CHECK(ds->document_length(1) == 0);
}

TEST_CASE("preprocess --json-keys writes PREFIX_KEY_document per key, as Megatron names them",
          "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt = options(
      dir,
      "{\"title\": \"One\", \"text\": \"first body\"}\n{\"title\": \"\", \"text\": \"second\"}\n");
  opt.json_keys = {"text", "title"};
  const PreprocessStats stats = preprocess(opt);
  CHECK(stats.outputs ==
        std::vector<std::string>{dir.file("out_text_document"), dir.file("out_title_document")});
  const auto tok = gpt2();
  const auto text = read_structure(dir.file("out_text_document"));
  const auto title = read_structure(dir.file("out_title_document"));
  REQUIRE(text.size() == 2);
  REQUIRE(title.size() == 2);  // both documents, the second title empty
  CHECK(tok->decode(text[0][0]) == "first body");
  CHECK(tok->decode(text[1][0]) == "second");
  CHECK(tok->decode(title[0][0]) == "One");
  CHECK(title[1].empty());
  CHECK_FALSE(std::filesystem::exists(dir.file("out.bin")));
  // With --split-sentences the level in the name is "sentence".
  opt.split_sentences = true;
  CHECK(preprocess_output_prefixes(opt).front() == dir.file("out_text_sentence"));
  // A line without one of the keys is a bad line naming that key.
  PreprocessOptions bad = options(dir, "{\"text\": \"x\"}\n");
  bad.json_keys = {"text", "title"};
  CHECK_THROWS_WITH(preprocess(bad), Catch::Contains("no key \"title\""));
}

TEST_CASE("preprocess --split-sentences makes each sentence a sequence of its document",
          "[preprocess]") {
  test::TempDir dir;
  PreprocessOptions opt =
      options(dir, "{\"text\": \"He left early. She stayed until noon.  Then rain.\"}\n");
  opt.split_sentences = true;
  opt.append_eod = true;
  preprocess(opt);
  const auto tok = gpt2();
  const auto docs = read_structure(opt.output_prefix);
  REQUIRE(docs.size() == 1);
  REQUIRE(docs[0].size() == 3);
  CHECK(tok->decode(docs[0][0]) == "He left early.");
  CHECK(tok->decode(docs[0][1]) == "She stayed until noon.");
  // <EOD> ends the document's last sequence.
  CHECK(tok->decode(docs[0][2]) == "Then rain.<|endoftext|>");
  // --keep-newlines: the whitespace after each sentence stays with it.
  opt.keep_newlines = true;
  opt.append_eod = false;
  preprocess(opt);
  const auto kept = read_structure(opt.output_prefix);
  REQUIRE(kept[0].size() == 3);
  CHECK(tok->decode(kept[0][0]) == "He left early. ");
  CHECK(tok->decode(kept[0][1]) == "She stayed until noon.  ");
}

}  // namespace mtnlg
