// Sample order against Megatron-LM's own code: tests/data/fixtures/megatron_order.json holds what
// Megatron-LM's BlendedMegatronDatasetBuilder, GPTDataset, BlendedDataset and helpers.cpp built
// (tests/data/make_megatron_order_fixtures.py, run once; the fixture names the commit) for eight
// data setups: one and many epochs, a separate final epoch and not, four seeds, empty documents,
// documents of several sentences (--split-sentences), and blends of 2, 3 (equal weights: ties)
// and 4 datasets. Here the same corpora are
// written with our builder and every split is built by build_train_dataset, the function the
// trainer calls; its indices (values and dtypes) and its samples must be Megatron's.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/json_parse.h"
#include "core/config/recipe.h"
#include "data/blended_dataset.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset_builder.h"
#include "data/shuffled_gpt_dataset.h"
#include "test_util.h"

namespace mtnlg {
namespace {

const JsonValue& member(const JsonValue& v, const char* key) {
  const JsonValue* m = v.find(key);
  REQUIRE(m != nullptr);
  return *m;
}

int64_t as_int(const JsonValue& v) {
  int64_t x = 0;
  REQUIRE(v.to_int64(&x));
  return x;
}

std::vector<int64_t> ints(const JsonValue& v) {
  REQUIRE(v.is_array());
  std::vector<int64_t> out;
  out.reserve(v.items.size());
  for (const JsonValue& x : v.items) out.push_back(as_int(x));
  return out;
}

std::vector<int64_t> values(const IndexArray& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[static_cast<size_t>(i)] = a[i];
  return v;
}

// The fixture's fingerprint: sum of token * (2654435761 * (i * (S + 1) + t) + 1), mod 2^64.
uint64_t fingerprint(const SampleSource& source) {
  const int64_t width = source.seq_length() + 1;
  std::vector<int32_t> row(static_cast<size_t>(width));
  uint64_t f = 0;
  for (int64_t i = 0; i < source.size(); ++i) {
    source.sample(i, row.data());
    for (int64_t t = 0; t < width; ++t) {
      const auto k = static_cast<uint64_t>(i * width + t);
      f += static_cast<uint64_t>(row[static_cast<size_t>(t)]) * (2654435761ULL * k + 1);
    }
  }
  return f;
}

// Document d of a corpus: tokens base + 101 d + p for p < its length (the fixture's
// token_rule), one sequence ("lengths") or one per sentence ("sentences", --split-sentences).
void write_corpora(const JsonValue& corpora, const test::TempDir& dir) {
  REQUIRE(corpora.is_object());
  for (const auto& [name, corpus] : corpora.members) {
    IndexedDatasetBuilder b(dir.file(name), TokenType::kUInt16);
    const int64_t base = as_int(member(corpus, "base"));
    std::vector<std::vector<int64_t>> sentences;
    if (const JsonValue* s = corpus.find("sentences")) {
      for (const JsonValue& doc : s->items) sentences.push_back(ints(doc));
    } else {
      for (int64_t n : ints(member(corpus, "lengths")))
        sentences.push_back(n > 0 ? std::vector<int64_t>{n} : std::vector<int64_t>{});
    }
    for (size_t d = 0; d < sentences.size(); ++d) {
      std::vector<int32_t> doc, lengths;
      for (int64_t n : sentences[d]) {
        lengths.push_back(static_cast<int32_t>(n));
        for (int64_t k = 0; k < n; ++k) {
          const auto p = static_cast<int64_t>(doc.size());
          doc.push_back(static_cast<int32_t>(base + 101 * static_cast<int64_t>(d) + p));
        }
      }
      b.add_document(doc, lengths);
    }
    b.finish();
  }
}

void check_gpt(const GPTDataset& ours, const JsonValue& theirs) {
  const std::vector<int64_t> docs = ints(member(theirs, "documents"));
  CHECK(ours.documents().begin == docs[0]);
  CHECK(ours.documents().end == docs[1]);
  CHECK(ours.num_epochs() == as_int(member(theirs, "num_epochs")));
  CHECK(ours.separate_final_epoch() == member(theirs, "separate_final_epoch").boolean);
  CHECK(index_type_name(ours.document_index().type()) ==
        member(theirs, "document_index_dtype").text);
  CHECK(index_type_name(ours.sample_index().type()) == member(theirs, "sample_index_dtype").text);
  CHECK(index_type_name(ours.shuffle_index().type()) == member(theirs, "shuffle_index_dtype").text);
  CHECK(values(ours.document_index()) == ints(member(theirs, "document_index")));
  CHECK(values(ours.sample_index()) == ints(member(theirs, "sample_index")));
  CHECK(values(ours.shuffle_index()) == ints(member(theirs, "shuffle_index")));
}

TEST_CASE("indices and samples are those Megatron-LM's code builds") {
  const std::string text =
      test::read_file(test::source_path("tests/data/fixtures/megatron_order.json"));
  const JsonValue fixture = parse_json(text, "megatron_order.json");
  INFO("Megatron-LM " << member(member(fixture, "megatron"), "describe").text);
  test::TempDir dir;
  write_corpora(member(fixture, "corpora"), dir);

  const JsonValue& cases = member(fixture, "cases");
  REQUIRE(cases.items.size() == 8);
  int splits_checked = 0;
  for (const JsonValue& c : cases.items) {
    INFO("case " << member(c, "name").text);
    DataConfig data;
    for (const JsonValue& entry : member(c, "blend").items) {
      const JsonValue& weight = entry.items[1];
      data.blend.push_back(
          {dir.file(entry.items[0].text), weight.is_number() ? std::stod(weight.text) : 1.0});
    }
    data.split.clear();
    for (const char* part = member(c, "split").text.c_str(); *part;) {
      char* end = nullptr;
      data.split.push_back(std::strtod(part, &end));
      part = *end == ',' ? end + 1 : end;
    }
    data.seed = static_cast<uint64_t>(as_int(member(c, "seed")));
    data.cache_dir = dir.file("cache");
    const int64_t seq_length = as_int(member(c, "seq_length"));
    const std::vector<int64_t> sizes = ints(member(c, "sizes"));

    for (const auto& [split_name, expected] : member(c, "splits").members) {
      INFO("split " << split_name);
      const Split which = split_name == "train"   ? Split::kTrain
                          : split_name == "valid" ? Split::kValid
                                                  : Split::kTest;
      const auto source =
          build_train_dataset(data, seq_length, sizes[static_cast<size_t>(which)], which);
      REQUIRE(source != nullptr);
      CHECK(source->size() == as_int(member(expected, "size")));
      const JsonValue& datasets = member(expected, "datasets");
      if (const auto* gpt = dynamic_cast<const GPTDataset*>(source.get())) {
        REQUIRE(datasets.items.size() == 1);
        check_gpt(*gpt, datasets.items[0]);
      } else {
        const auto* blend = dynamic_cast<const BlendedDataset*>(source.get());
        REQUIRE(blend != nullptr);
        REQUIRE(blend->num_sources() == datasets.items.size());
        for (size_t k = 0; k < blend->num_sources(); ++k) {
          INFO("dataset " << k);
          const auto* gpt = dynamic_cast<const GPTDataset*>(&blend->source(k));
          REQUIRE(gpt != nullptr);
          CHECK(gpt->config().num_samples == as_int(member(datasets.items[k], "num_samples")));
          check_gpt(*gpt, datasets.items[k]);
        }
        CHECK(index_type_name(blend->dataset_index().type()) ==
              member(expected, "dataset_index_dtype").text);
        CHECK(index_type_name(blend->dataset_sample_index().type()) ==
              member(expected, "dataset_sample_index_dtype").text);
        CHECK(values(blend->dataset_index()) == ints(member(expected, "dataset_index")));
        CHECK(values(blend->dataset_sample_index()) ==
              ints(member(expected, "dataset_sample_index")));
      }
      // The samples themselves: the first ones in full, all of them by fingerprint.
      const JsonValue& shown = member(expected, "samples");
      std::vector<int32_t> row(static_cast<size_t>(seq_length + 1));
      for (size_t i = 0; i < shown.items.size(); ++i) {
        source->sample(static_cast<int64_t>(i), row.data());
        CHECK(std::vector<int64_t>(row.begin(), row.end()) == ints(shown.items[i]));
      }
      CHECK(std::to_string(fingerprint(*source)) == member(expected, "fingerprint").text);
      ++splits_checked;
    }
  }
  CHECK(splits_checked == 18);
}

}  // namespace
}  // namespace mtnlg
