// mtnlg-generate's and mtnlg-eval's library (cmd/generate.h, cmd/eval.h): a greedy continuation
// and a corpus loss against the independent PyTorch reference (tests/reference/
// gpt2_torch_reference.py: full forward per token, float64), loading the weights as the commands
// do (a Hugging Face file and its config.json); and the sampler's rules.
#include "cmd/generate.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "checkpoint/hf_import.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline.h"
#include "checkpoint/safetensors.h"
#include "cmd/eval.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset_builder.h"
#include "test_util.h"

namespace mtnlg {
namespace {

constexpr int64_t kLayers = 2, kHidden = 32, kHeads = 4, kSeq = 16, kPositions = 40, kVocab = 300;
constexpr int64_t kNew = 20, kStream = 300;

void run_reference(const std::string& act, const test::TempDir& dir) {
  const std::string cmd =
      "/usr/bin/python3 " + test::source_path("tests/reference/gpt2_torch_reference.py") +
      " --layers " + std::to_string(kLayers) + " --hidden " + std::to_string(kHidden) +
      " --heads " + std::to_string(kHeads) + " --seq " + std::to_string(kSeq) + " --vocab " +
      std::to_string(kVocab) + " --max-positions " + std::to_string(kPositions) +
      " --batch 1 --seed 77 --weights-dtype f32 --weight-std 0.3 --activation " + act +
      " --generate " + std::to_string(kNew) + " --stream-tokens " + std::to_string(kStream) +
      " --out " + dir.path().string();
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  // What Hugging Face writes beside model.safetensors (mtnlg-ckpt export writes the same).
  test::write_file(dir.file("config.json"),
                   "{\"model_type\": \"gpt2\", \"n_layer\": " + std::to_string(kLayers) +
                       ", \"n_embd\": " + std::to_string(kHidden) + ", \"n_head\": " +
                       std::to_string(kHeads) + ", \"n_positions\": " + std::to_string(kPositions) +
                       ", \"vocab_size\": " + std::to_string(kVocab) +
                       ", \"activation_function\": \"" + (act == "gelu" ? "gelu" : "gelu_new") +
                       "\", \"layer_norm_epsilon\": 1e-05, \"n_inner\": null}");
}

std::vector<int32_t> ints(const Tensor& t) {
  const int32_t* p = t.data_as<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

TEST_CASE("greedy generation and corpus loss match the PyTorch reference") {
  const std::string act = GENERATE(std::string("gelu"), std::string("gelu_tanh"));
  INFO("activation " << act);
  test::TempDir dir;
  run_reference(act, dir);
  const SafetensorsFile tokens(dir.file("tokens.safetensors"));
  const SafetensorsFile ref(dir.file("reference.safetensors"));
  auto backend = make_cpu_backend(1);

  SECTION("greedy continuation, through the key/value cache") {
    LoadedModel loaded = load_model({"", dir.file("weights.safetensors"), "", 0, {}}, *backend);
    CHECK_FALSE(loaded.recipe.has_value());
    const GPTConfig& c = loaded.model->config();
    CHECK((c.num_layers == kLayers && c.heads == kHeads && c.vocab == kVocab &&
           c.padded_vocab == 384));
    CHECK(c.activation == (act == "gelu" ? Activation::kGelu : Activation::kGeluTanh));
    // The reference's choices are clear: float32 rounding cannot flip them.
    const Tensor margins = ref.read("greedy_margin", DType::kF64);
    for (int64_t i = 0; i < margins.numel(); ++i) REQUIRE(margins.data_as<double>()[i] > 1e-4);

    const std::vector<int32_t> prompt = ints(tokens.read("inputs", DType::kI32));
    REQUIRE(prompt.size() == static_cast<size_t>(kSeq));
    GPTDecoder decoder(*loaded.model, kSeq + kNew);
    SamplingOptions greedy;
    greedy.temperature = 0;
    TokenSampler sampler(greedy);
    const std::vector<int32_t> out = generate(decoder, prompt, {kNew, -1}, sampler);
    CHECK(out == ints(ref.read("greedy", DType::kI32)));
    // A continuation that depends on its context: at least 5 distinct tokens.
    CHECK(std::set<int32_t>(out.begin(), out.end()).size() >= 5);
    CHECK(decoder.position() == kSeq + kNew - 1);  // the last token is returned, not fed
    // Stopping: a stop token ends the continuation right after its first appearance.
    const auto first = std::find(out.begin(), out.end(), out[3]);
    const std::vector<int32_t> stopped = generate(decoder, prompt, {kNew, out[3]}, sampler);
    CHECK(stopped == std::vector<int32_t>(out.begin(), first + 1));
  }

  SECTION("loss over a .bin/.idx, as mtnlg-eval cuts it") {
    LoadedModel loaded = load_model({"", dir.file("weights.safetensors"), "", kSeq, {}}, *backend);
    const std::vector<int32_t> stream = ints(ref.read("stream", DType::kI32));
    IndexedDatasetBuilder b(dir.file("stream"), TokenType::kUInt16);
    // Three documents: samples cross their boundaries as the stream runs on.
    b.add_document(std::span<const int32_t>(stream.data(), 100));
    b.add_document(std::span<const int32_t>(stream.data() + 100, 7));
    b.add_document(std::span<const int32_t>(stream.data() + 107, stream.size() - 107));
    b.finish();
    auto ids = IndexedDataset::open(dir.file("stream"));
    SequentialGPTDataset ds(ids, kSeq, {0, ids->num_sequences()});
    const int64_t count = (kStream - 1) / kSeq;
    const EvalResult r = evaluate(*loaded.model, ds, count, 3);  // 18 samples: a short last batch
    const double want = ref.read("stream_loss", DType::kF64).data_as<double>()[0];
    INFO("loss " << r.loss << " reference " << want);
    CHECK(std::abs(r.loss - want) <= 1e-5 * want);
    CHECK(r.ppl == Approx(std::exp(want)).epsilon(1e-5));
    CHECK(r.tokens == count * kSeq);
  }
}

TEST_CASE("a model is named once, and its config.json is read strictly") {
  auto backend = make_cpu_backend(1);
  const Error both = [&] {
    try {
      load_model({"ckpt", "model.safetensors", "", 0, {}}, *backend);
    } catch (const Error& e) {
      return e;
    }
    FAIL("expected an error");
    throw std::logic_error("unreachable");
  }();
  CHECK(both.context() == "--checkpoint");
  test::TempDir dir;
  test::write_file(dir.file("config.json"), "{\"n_layer\": 2, \"n_embd\": 30, \"n_head\": 4}");
  CHECK_THROWS_WITH(hf_gpt2_config(dir.file("config.json")), Catch::Contains("n_positions"));
  test::write_file(dir.file("config.json"),
                   "{\"n_layer\": 2, \"n_embd\": 30, \"n_head\": 4, \"n_positions\": 8, "
                   "\"vocab_size\": 10}");
  CHECK_THROWS_WITH(hf_gpt2_config(dir.file("config.json")), Catch::Contains("n_head"));
  test::write_file(dir.file("config.json"),
                   "{\"n_layer\": 2, \"n_embd\": 32, \"n_head\": 4, \"n_positions\": 8, "
                   "\"vocab_size\": 10, \"activation_function\": \"relu\"}");
  CHECK_THROWS_WITH(hf_gpt2_config(dir.file("config.json")), Catch::Contains("relu"));
  // The recipe's model bounds and checks, before anything is sized by the file's numbers (these
  // ended in std::bad_alloc, or in NaN logits and exit 0).
  const auto refused = [&](const std::string& extra, const std::string& field) {
    test::write_file(dir.file("config.json"),
                     "{\"n_layer\": 2, \"n_embd\": 32, \"n_head\": 4, " + extra + "}");
    try {
      hf_gpt2_config(dir.file("config.json"));
      FAIL("accepted " << extra);
    } catch (const Error& e) {
      CHECK(e.code() == Code::kInvalidArgument);
      CHECK(e.context() == dir.file("config.json"));
      CHECK_THAT(e.message(), Catch::StartsWith(field + " (as model."));
    }
  };
  refused("\"n_positions\": 1000000000000, \"vocab_size\": 10", "n_positions");
  refused("\"n_positions\": 8, \"vocab_size\": 1000000000000000000", "vocab_size");
  refused("\"n_positions\": 8, \"vocab_size\": 10, \"layer_norm_epsilon\": -1",
          "layer_norm_epsilon");
  refused("\"n_positions\": 8, \"vocab_size\": 10, \"n_inner\": 100000000", "n_inner");
}

// mtnlg-eval and mtnlg-generate make their backend before they read the weights: with the
// attention kernels the checkpoint was trained with (its recipe's model.attention_backend), or
// --set's, not always auto.
TEST_CASE("a checkpoint's attention kernels, or --set's, choose the backend's") {
  test::TempDir dir;
  const Recipe r =
      load_recipe(test::source_path("configs/tiny.yaml"),
                  {"model.attention_backend=flash2", "checkpoint.dir=" + dir.path().string()});
  auto backend = make_cpu_backend(1);
  const GPTConfig config = gpt_config_from(r);
  GPTStage model(config, full_model(config), *backend, DType::kF32, r.seed);
  CheckpointManifest m;
  m.iteration = 3;
  write_whole_checkpoint(dir.path().string(), m, r, model, nullptr, nullptr, std::nullopt);
  CHECK(attention_backend_of({dir.path().string(), "", "", 0, {}}) == AttentionBackend::kFlash2);
  CHECK(
      attention_backend_of({dir.path().string(), "", "", 0, {"model.attention_backend=blocked"}}) ==
      AttentionBackend::kBlocked);
  CHECK(attention_backend_of({"", "model.safetensors", "", 0, {}}) == AttentionBackend::kAuto);
  CHECK_THROWS_WITH(attention_backend_of({dir.file("nowhere"), "", "", 0, {}}),
                    Catch::Contains("nowhere"));
}

TEST_CASE("the sampler: greedy, top-k, top-p, temperature and the seed") {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, -1.0f};
  SamplingOptions o;
  o.temperature = 0;
  TokenSampler greedy(o);
  CHECK(greedy.pick(logits) == 1);  // ties go to the lowest id

  // top-k 1 and a tiny top-p are greedy at any temperature.
  o.temperature = 5;
  o.top_k = 1;
  TokenSampler k1(o);
  o.top_k = 0;
  o.top_p = 1e-6;
  TokenSampler p0(o);
  for (int i = 0; i < 50; ++i) {
    CHECK(k1.pick(logits) == 1);
    CHECK(p0.pick(logits) == 1);
  }

  // Frequencies follow softmax(z / T) within the top-k; same seed, same draws.
  o.top_p = 1;
  o.top_k = 3;
  o.temperature = 2;
  o.seed = 9;
  TokenSampler a(o), b(o);
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t t = a.pick(logits);
    CHECK(t == b.pick(logits));
    ++counts[t];
  }
  CHECK(counts.size() == 3);  // ids 1, 2 (z = 3) and 3 (z = 2); never 0 or 4
  const double e3 = std::exp(1.5), e2 = std::exp(1.0), z = 2 * e3 + e2;
  CHECK(counts[1] / double(n) == Approx(e3 / z).margin(0.015));
  CHECK(counts[3] / double(n) == Approx(e2 / z).margin(0.015));

  // top-p 0.6 over all five at T = 2: the z = 3 pair holds 0.32 + 0.32 = 0.64 >= 0.6 of the
  // mass, so the nucleus is ids 1 and 2.
  o.top_k = 0;
  o.top_p = 0.6;
  o.temperature = 2;
  TokenSampler nucleus(o);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = nucleus.pick(logits);
    CHECK((t == 1 || t == 2));
  }

  for (auto [temp, k, p, flag] :
       {std::tuple{-1.0, 0L, 1.0, "--temperature"}, std::tuple{1.0, -2L, 1.0, "--top-k"},
        std::tuple{1.0, 0L, 0.0, "--top-p"}, std::tuple{1.0, 0L, 1.5, "--top-p"}}) {
    SamplingOptions bad;
    bad.temperature = temp;
    bad.top_k = k;
    bad.top_p = p;
    try {
      check_sampling(bad);
      FAIL("accepted " << flag);
    } catch (const Error& e) {
      CHECK(e.context() == flag);
    }
  }
}

}  // namespace
}  // namespace mtnlg
