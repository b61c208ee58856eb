#include "checkpoint/hf_import.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>

#include "model/gpt_params.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

GPTConfig tiny_config() {
  GPTConfig c = test::tiny_gpt(2);
  c.max_positions = 12;  // more positions than the sequence: the import keeps them all
  return c;
}

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  GPTConfig config = tiny_config();
  test::TempDir dir;

  std::unique_ptr<GPTStage> model(DType dtype, uint64_t seed) {
    auto m = std::make_unique<GPTStage>(config, full_model(config), *be, dtype, 1);
    m->init_weights(seed);
    return m;
  }

  // Writes `tensors` (after `edit`) under `prefix`, returns the path.
  std::string write(std::vector<HFTensor> tensors, const std::string& prefix = "",
                    const std::function<void(SafetensorsWriter&)>& extra = {}) {
    std::string name = std::to_string(files++);
    name += ".safetensors";
    const std::string path = dir.file(name);
    SafetensorsWriter w(path);
    for (const auto& t : tensors) w.add(prefix + t.name, t.tensor);
    if (extra) extra(w);
    w.commit();
    return path;
  }
  int files = 0;
};

std::vector<HFTensor> without(std::vector<HFTensor> v, const std::string& name) {
  std::erase_if(v, [&](const HFTensor& t) { return t.name == name; });
  return v;
}

Tensor find(const std::vector<HFTensor>& v, const std::string& name) {
  for (const auto& t : v)
    if (t.name == name) return t.tensor;
  FAIL("no " << name);
  return Tensor();
}

bool same_values(GPTStage& a, GPTStage& b) {
  for (size_t i = 0; i < a.params().params().size(); ++i) {
    const Tensor& x = a.params().params()[i].value;
    const Tensor& y = b.params().params()[i].value;
    if (std::memcmp(x.data(), y.data(), x.nbytes()) != 0) return false;
  }
  return true;
}

// The error load_hf_gpt2 throws for `path`; it must mention each of `mentions`.
Error load_error(GPTStage& m, const std::string& path, const std::vector<std::string>& mentions) {
  try {
    load_hf_gpt2(m, path);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    for (const auto& s : mentions) CHECK(std::string(e.what()).find(s) != std::string::npos);
    return e;
  }
  FAIL("load accepted " << path);
  return Error(Code::kInternal, "");
}

TEST_CASE("export then import reproduces every parameter - f64 and f32") {
  Fixture f;
  for (DType dt : {DType::kF64, DType::kF32}) {
    auto src = f.model(dt, 11);
    // Padded vocabulary rows are not part of the HF file; zero them so the models compare.
    Param& wte = src->params().get("embedding.word_embeddings.weight");
    std::memset(
        static_cast<char*>(wte.value.data()) + f.config.vocab * f.config.hidden * dtype_size(dt), 0,
        (f.config.padded_vocab - f.config.vocab) * f.config.hidden * dtype_size(dt));
    const auto hf = to_hf_gpt2(*src, false);
    CHECK(hf.size() == 2 + 12 * 2 + 2);
    CHECK(find(hf, "wte.weight").shape() == Shape{50, 16});
    CHECK(find(hf, "h.1.attn.c_attn.weight").shape() == Shape{16, 48});
    CHECK(find(hf, "h.1.mlp.c_proj.weight").shape() == Shape{64, 16});
    auto dst = f.model(dt, 99);
    CHECK_FALSE(same_values(*src, *dst));
    load_hf_gpt2(*dst, f.write(hf));
    CHECK(same_values(*src, *dst));
  }
}

TEST_CASE("import puts HF's Conv1D and q|k|v layout into ours") {
  Fixture f;
  auto m = f.model(DType::kF64, 1);
  auto hf = to_hf_gpt2(*m, false);
  const int64_t h = 16, hd = 8;
  // Recognisable values: HF element [i][col] = col * 1000 + i.
  double* qkv = find(hf, "h.0.attn.c_attn.weight").data_as<double>();
  double* qkv_b = find(hf, "h.0.attn.c_attn.bias").data_as<double>();
  double* fc = find(hf, "h.0.mlp.c_fc.weight").data_as<double>();
  for (int64_t i = 0; i < h; ++i)
    for (int64_t col = 0; col < 3 * h; ++col) qkv[i * 3 * h + col] = col * 1000.0 + i;
  for (int64_t col = 0; col < 3 * h; ++col) qkv_b[col] = col;
  for (int64_t i = 0; i < h; ++i)
    for (int64_t o = 0; o < 64; ++o) fc[i * 64 + o] = o * 1000.0 + i;
  // A padded wte row that holds garbage must come back zero.
  Param& wte = m->params().get("embedding.word_embeddings.weight");
  wte.value.data_as<double>()[60 * h] = 5.0;
  load_hf_gpt2(*m, f.write(hf));
  CHECK(wte.value.data_as<double>()[60 * h] == 0.0);

  const double* w = m->params()
                        .get(layer_param(0, "self_attention.query_key_value.weight"))
                        .value.data_as<double>();
  const double* b = m->params()
                        .get(layer_param(0, "self_attention.query_key_value.bias"))
                        .value.data_as<double>();
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t which = 0; which < 3; ++which)  // q, k, v
      for (int64_t d = 0; d < hd; ++d) {
        const int64_t row = head * 3 * hd + which * hd + d;
        const int64_t col = which * h + head * hd + d;
        CHECK(b[row] == col);
        for (int64_t i = 0; i < h; ++i) CHECK(w[row * h + i] == col * 1000.0 + i);
      }
  const double* fcw =
      m->params().get(layer_param(0, "mlp.dense_h_to_4h.weight")).value.data_as<double>();
  for (int64_t o = 0; o < 64; ++o)
    for (int64_t i = 0; i < h; ++i) CHECK(fcw[o * h + i] == o * 1000.0 + i);
}

TEST_CASE("transformer. prefix - tied lm_head and attention buffers are accepted") {
  Fixture f;
  auto src = f.model(DType::kF64, 3);
  const auto hf = to_hf_gpt2(*src, false);
  const Tensor wte = find(hf, "wte.weight");
  const std::string path = f.write(hf, "transformer.", [&](SafetensorsWriter& w) {
    w.add("lm_head.weight", wte);
    for (int i = 0; i < 2; ++i) {
      const std::vector<float> mask(8 * 8, 1.0f);
      w.add("transformer.h." + std::to_string(i) + ".attn.bias", safetensors::DType::kF32,
            {1, 1, 8, 8}, mask.data(), mask.size() * 4);
      const float mb = -1e4f;
      w.add("transformer.h." + std::to_string(i) + ".attn.masked_bias", safetensors::DType::kF32,
            {}, &mb, 4);
    }
  });
  auto dst = f.model(DType::kF64, 4);
  load_hf_gpt2(*dst, path);
  const auto back = to_hf_gpt2(*dst, false);
  for (size_t i = 0; i < hf.size(); ++i)
    CHECK(std::memcmp(hf[i].tensor.data(), back[i].tensor.data(), hf[i].tensor.nbytes()) == 0);

  // An f32 copy of the head that equals wte in value is tied too.
  Tensor head32 = Tensor::cpu(wte.shape(), DType::kF32);
  for (int64_t i = 0; i < wte.numel(); ++i)
    head32.data_as<float>()[i] = static_cast<float>(wte.data_as<double>()[i]);
  Tensor wte32 = Tensor::cpu(wte.shape(), DType::kF64);
  for (int64_t i = 0; i < wte.numel(); ++i) wte32.data_as<double>()[i] = head32.data_as<float>()[i];
  auto hf2 = without(hf, "wte.weight");
  hf2.push_back({"wte.weight", wte32});
  load_hf_gpt2(*dst,
               f.write(hf2, "", [&](SafetensorsWriter& w) { w.add("lm_head.weight", head32); }));
}

TEST_CASE("import errors name the tensor and leave the model unchanged") {
  Fixture f;
  auto src = f.model(DType::kF64, 5);
  const auto hf = to_hf_gpt2(*src, false);
  auto m = f.model(DType::kF64, 6);
  auto before = f.model(DType::kF64, 6);

  SECTION("wrong shape") {
    auto bad = without(hf, "h.1.mlp.c_fc.weight");
    bad.push_back({"h.1.mlp.c_fc.weight", Tensor::cpu({16, 60}, DType::kF64)});
    const Error e = load_error(*m, f.write(bad), {"'h.1.mlp.c_fc.weight'", "[16, 60]", "[16, 64]"});
    CHECK(e.code() == Code::kInvalidArgument);
  }
  SECTION("missing tensor") {
    const Error e =
        load_error(*m, f.write(without(hf, "h.0.ln_2.bias")), {"missing", "'h.0.ln_2.bias'"});
    CHECK(e.code() == Code::kNotFound);
  }
  SECTION("wpe rows != max_position_embeddings") {
    auto bad = without(hf, "wpe.weight");
    bad.push_back({"wpe.weight", Tensor::cpu({1024, 16}, DType::kF64)});
    load_error(*m, f.write(bad), {"'wpe.weight'", "1024 rows", "max_position_embeddings is 12"});
  }
  SECTION("wte rows != vocab_size") {
    auto bad = without(hf, "wte.weight");
    bad.push_back({"wte.weight", Tensor::cpu({64, 16}, DType::kF64)});
    load_error(*m, f.write(bad), {"'wte.weight'", "vocab_size is 50"});
  }
  SECTION("unexpected tensor") {
    auto bad = hf;
    bad.push_back({"h.2.ln_1.weight", Tensor::cpu({16}, DType::kF64)});
    load_error(*m, f.write(bad), {"unexpected tensor 'h.2.ln_1.weight'", "2 layers"});
  }
  SECTION("lm_head different from wte") {
    Tensor head = Tensor::cpu({50, 16}, DType::kF64);
    std::memcpy(head.data(), find(hf, "wte.weight").data(), head.nbytes());
    head.data_as<double>()[17] += 1e-3;
    load_error(*m, f.write(hf, "", [&](SafetensorsWriter& w) { w.add("lm_head.weight", head); }),
               {"'lm_head.weight' differs from 'wte.weight'"});
  }
  SECTION("a tensor with and without the prefix") {
    load_error(*m,
               f.write(hf, "",
                       [&](SafetensorsWriter& w) {
                         w.add("transformer.ln_f.bias", find(hf, "ln_f.bias"));
                       }),
               {"'ln_f.bias' appears twice"});
  }
  SECTION("a NaN or an infinity in a weight names the tensor") {
    for (const double bad_value : {std::nan(""), HUGE_VAL}) {
      auto bad = without(hf, "h.1.attn.c_proj.weight");
      Tensor t = Tensor::cpu({16, 16}, DType::kF64);
      t.data_as<double>()[37] = bad_value;
      bad.push_back({"h.1.attn.c_proj.weight", t});
      const Error e = load_error(*m, f.write(bad), {"'h.1.attn.c_proj.weight' element 37"});
      CHECK(e.code() == Code::kCorruption);
    }
  }
  SECTION("integer data where weights belong") {
    const std::string path = f.write(without(hf, "ln_f.weight"), "", [&](SafetensorsWriter& w) {
      Tensor ints = Tensor::cpu({16}, DType::kI32);
      w.add("ln_f.weight", ints);
    });
    const Error e = load_error(*m, path, {"'ln_f.weight' is I32"});
    CHECK(e.code() == Code::kCorruption);
  }
  SECTION("a file that is not safetensors") {
    const std::string path = f.dir.file("junk");
    test::write_file(path, "hello");
    const Error e = load_error(*m, path, {});
    CHECK(e.code() == Code::kCorruption);
  }
  CHECK(same_values(*m, *before));
}

TEST_CASE("a pipeline stage loads only its own layers") {
  Fixture f;
  auto src = f.model(DType::kF64, 8);
  const std::string path = f.write(to_hf_gpt2(*src, false));
  const StageSpec last{1, 2, false, true};
  GPTStage stage(f.config, last, *f.be, DType::kF64, 1);
  stage.init_weights(9);
  load_hf_gpt2(stage, path);
  for (const Param& p : stage.params().params()) {
    const Param& q = src->params().get(p.spec.name);
    INFO(p.spec.name);
    // The tied head's copy: its vocabulary rows (the padded rows are zero after a load).
    const size_t bytes =
        p.spec.name == "embedding.word_embeddings.weight"
            ? static_cast<size_t>(f.config.vocab * f.config.hidden) * sizeof(double)
            : p.value.nbytes();
    CHECK(std::memcmp(p.value.data(), q.value.data(), bytes) == 0);
  }
  CHECK(to_hf_gpt2(stage, false).size() == 1 + 12 + 2);
}

// Each tensor-parallel rank (threads with Gloo over a MemoryStore) loads its block of every
// split tensor: element k of the shard is the global element global_index(spec, k), the layout
// init_values uses, and the padded vocabulary rows are zero. Worker threads never touch Catch.
TEST_CASE("tensor-parallel ranks load their shard of every split tensor") {
  Fixture f;
  f.config.heads = 4;
  auto src = f.model(DType::kF64, 8);
  const std::string path = f.write(to_hf_gpt2(*src, false));
  const int tp = 2;
  MemoryStore store;
  std::vector<int64_t> checked(tp, 0), sharded(tp, 0), local(tp, -1);
  test::run_ranks(tp, [&](int r) {
    auto comm = make_gloo_communicator(store, "tensor", r, {0, 1}, std::chrono::seconds(20));
    GPTConfig c = f.config;
    c.tp_size = tp;
    c.tp_rank = r;
    auto be = make_cpu_backend(1);
    GPTStage shard(c, full_model(c), *be, DType::kF64, 1, comm.get());
    shard.init_weights(9);
    load_hf_gpt2(shard, path);
    local[r] = shard.params().local_numel();
    for (const Param& p : shard.params().params()) {
      const double* got = p.value.data_as<double>();
      const double* want = src->params().get(p.spec.name).value.data_as<double>();
      const bool wte = p.spec.name == "embedding.word_embeddings.weight";
      if (p.spec.local_shape != p.spec.global_shape) ++sharded[r];
      for (int64_t k = 0; k < p.value.numel(); ++k) {
        const int64_t g = global_index(p.spec, k);
        const double expect = wte && g / c.hidden >= c.vocab ? 0.0 : want[g];
        if (got[k] != expect)
          throw std::runtime_error("rank " + std::to_string(r) + ": " + p.spec.name + " element " +
                                   std::to_string(k) + " is " + std::to_string(got[k]) +
                                   ", expected " + std::to_string(expect));
        ++checked[r];
      }
    }
  });
  for (int r = 0; r < tp; ++r) {
    CHECK(checked[r] == local[r]);
    CHECK(sharded[r] == 1 + 2 * 6);  // wte, and per layer QKV w/b, dense w, fc1 w/b, fc2 w
  }
}

}  // namespace
}  // namespace mtnlg
