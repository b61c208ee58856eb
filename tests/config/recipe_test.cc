// Recipe parsing: every key, defaults, --set overrides, path resolution, recipe_to_yaml round
// trips, the recipes in configs/, check_supported and padded_vocab_size. The validation errors
// are in recipe_errors_test.cc.
#include "core/config/recipe.h"

#include <catch2/catch.hpp>

#include <filesystem>

#include "config/recipe_test_util.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using test::kMinimalRecipe;

std::string cwd_path(const std::string& rel) {
  return (std::filesystem::current_path() / rel).lexically_normal().string();
}

// Every key of the schema, none at its default.
const char* const kFullRecipe = R"(
model:
  num_layers: 12
  hidden_size: 768
  num_attention_heads: 12
  ffn_hidden_size: 3000
  seq_length: 1024
  max_position_embeddings: 2048
  vocab_size: 50000
  make_vocab_size_divisible_by: 64
  activation: gelu_tanh
  layernorm_epsilon: 1.0e-6
  init_method_std: 0.006
  hidden_dropout: 0.05
  attention_dropout: 0.02
  attention_backend: flash2
  init_from: /models/gpt2.safetensors
parallel:
  tensor: 4
  pipeline: 3
  data: 2
  micro_batch_size: 2
  zero_stage: 1
  activation_checkpointing: true
  grad_reduce_dtype: bf16
  transport: tcp
precision: bf16
optimizer:
  lr: 6.0e-4
  min_lr: 6.0e-5
  betas: [0.85, 0.98]
  eps: 1.0e-6
  weight_decay: 0.2
  clip_grad: 0.5
  loss_scale: 0
  initial_loss_scale: 65536
  loss_scale_window: 500
  hysteresis: 3
  min_loss_scale: 2
schedule:
  warmup_tokens: 375e6
  decay_tokens: 260e9
  decay_style: linear
  train_tokens: 300e9
  train_iters: 600000
batch:
  global_batch_size: 512
  rampup: {start: 64, increment: 64, tokens: 4e9}
data:
  blend:
    - {prefix: /data/a_text_document, weight: 0.7}
    - prefix: /data/b_text_document
      weight: 0.3
  split: [969, 30, 1]
  seed: 99
  shuffle: false
  cache_dir: /scratch/cache
checkpoint:
  dir: /ckpt/run1
  save_interval: 500
  keep_last: 3
  async: true
  resume: true
  load: /ckpt/base
  load_optimizer: false
  load_iteration: 700
logging:
  interval: 5
  metrics_file: /runs/run1/metrics.jsonl
  tensorboard_dir: /runs/run1/tb
eval:
  interval: 200
  iters: 20
tokenizer:
  vocab_file: /tok/encoder.json
  merge_file: /tok/vocab.bpe
seed: 4321
)";

TEST_CASE("parse_recipe reads every key", "[config]") {
  const Recipe r = parse_recipe(kFullRecipe, {});
  CHECK(r.model.num_layers == 12);
  CHECK(r.model.hidden_size == 768);
  CHECK(r.model.num_attention_heads == 12);
  CHECK(r.model.ffn_hidden_size == 3000);
  CHECK(r.model.seq_length == 1024);
  CHECK(r.model.max_position_embeddings == 2048);
  CHECK(r.model.vocab_size == 50000);
  CHECK(r.model.make_vocab_size_divisible_by == 64);
  CHECK(r.model.activation == Activation::kGeluTanh);
  CHECK(r.model.layernorm_epsilon == 1.0e-6);
  CHECK(r.model.init_method_std == 0.006);
  CHECK(r.model.hidden_dropout == 0.05);
  CHECK(r.model.attention_dropout == 0.02);
  CHECK(r.model.init_from == "/models/gpt2.safetensors");
  CHECK(r.parallel.tensor == 4);
  CHECK(r.parallel.pipeline == 3);
  CHECK(r.parallel.data == 2);
  CHECK(r.parallel.micro_batch_size == 2);
  CHECK(r.parallel.zero_stage == 1);
  CHECK(r.parallel.activation_checkpointing);
  CHECK(r.precision == Precision::kBF16);
  CHECK(r.optimizer.lr == 6.0e-4);
  CHECK(r.optimizer.min_lr == 6.0e-5);
  CHECK(r.optimizer.beta1 == 0.85);
  CHECK(r.optimizer.beta2 == 0.98);
  CHECK(r.optimizer.eps == 1.0e-6);
  CHECK(r.optimizer.weight_decay == 0.2);
  CHECK(r.optimizer.clip_grad == 0.5);
  CHECK(r.optimizer.loss_scale == 0.0);
  CHECK(r.optimizer.initial_loss_scale == 65536.0);
  CHECK(r.optimizer.loss_scale_window == 500);
  CHECK(r.optimizer.hysteresis == 3);
  CHECK(r.optimizer.min_loss_scale == 2.0);
  CHECK(r.parallel.grad_reduce_dtype == Precision::kBF16);
  CHECK(r.parallel.transport == CpuTransport::kTcp);
  CHECK(r.model.attention_backend == AttentionBackend::kFlash2);
  CHECK(r.schedule.warmup_tokens == 375'000'000);
  CHECK(r.schedule.decay_tokens == 260'000'000'000);
  CHECK(r.schedule.decay_style == DecayStyle::kLinear);
  CHECK(r.schedule.train_tokens == 300'000'000'000);
  CHECK(r.schedule.train_iters == 600000);
  CHECK(r.batch.global_batch_size == 512);
  CHECK(r.batch.rampup.start == 64);
  CHECK(r.batch.rampup.increment == 64);
  CHECK(r.batch.rampup.tokens == 4'000'000'000);
  REQUIRE(r.data.blend.size() == 2);
  CHECK(r.data.blend[0].prefix == "/data/a_text_document");
  CHECK(r.data.blend[0].weight == 0.7);
  CHECK(r.data.blend[1].prefix == "/data/b_text_document");
  CHECK(r.data.blend[1].weight == 0.3);
  CHECK(r.data.split == std::vector<double>{969, 30, 1});
  CHECK(r.data.seed == 99);
  CHECK_FALSE(r.data.shuffle);
  CHECK(r.data.cache_dir == "/scratch/cache");
  CHECK(r.checkpoint.dir == "/ckpt/run1");
  CHECK(r.checkpoint.save_interval == 500);
  CHECK(r.checkpoint.keep_last == 3);
  CHECK(r.checkpoint.async);
  CHECK(r.checkpoint.resume);
  CHECK(r.checkpoint.load == "/ckpt/base");
  CHECK_FALSE(r.checkpoint.load_optimizer);
  CHECK(r.checkpoint.load_iteration == 700);
  CHECK(r.tokenizer.vocab_file == "/tok/encoder.json");
  CHECK(r.tokenizer.merge_file == "/tok/vocab.bpe");
  CHECK(r.logging.interval == 5);
  CHECK(r.logging.metrics_file == "/runs/run1/metrics.jsonl");
  CHECK(r.logging.tensorboard_dir == "/runs/run1/tb");
  CHECK(r.eval.interval == 200);
  CHECK(r.eval.iters == 20);
  CHECK(r.seed == 4321);
  CHECK(r.tokens_per_iteration() == 512 * 1024);
}

TEST_CASE("parse_recipe fills the defaults", "[config]") {
  const Recipe r = parse_recipe(kMinimalRecipe, {});
  const ModelConfig m;
  CHECK(r.model.ffn_hidden_size == 4 * 64);
  CHECK(r.model.max_position_embeddings == 32);
  CHECK(r.model.vocab_size == 50257);
  CHECK(r.model.make_vocab_size_divisible_by == 128);
  CHECK(r.model.activation == Activation::kGelu);
  CHECK(r.model.layernorm_epsilon == m.layernorm_epsilon);
  CHECK(r.model.init_method_std == 0.02);
  CHECK(r.model.hidden_dropout == 0.1);
  CHECK(r.model.attention_dropout == 0.1);
  CHECK(r.model.init_from.empty());
  CHECK(r.parallel.tensor == 1);
  CHECK(r.parallel.pipeline == 1);
  CHECK(r.parallel.data == 0);
  CHECK(r.parallel.micro_batch_size == 1);
  CHECK(r.parallel.zero_stage == 0);
  CHECK_FALSE(r.parallel.activation_checkpointing);
  CHECK(r.precision == Precision::kFP32);
  const OptimizerConfig o;
  CHECK(r.optimizer.lr == o.lr);
  CHECK(r.optimizer.min_lr == o.min_lr);
  CHECK(r.optimizer.beta1 == o.beta1);
  CHECK(r.optimizer.beta2 == o.beta2);
  CHECK(r.optimizer.eps == o.eps);
  CHECK(r.optimizer.weight_decay == o.weight_decay);
  CHECK(r.optimizer.clip_grad == o.clip_grad);
  CHECK(r.schedule.warmup_tokens == 0);
  CHECK(r.schedule.decay_style == DecayStyle::kCosine);
  CHECK(r.schedule.train_tokens == 0);
  CHECK(r.schedule.train_iters == 10);
  // Only train_iters given: decay over train_iters full-batch iterations.
  CHECK(r.schedule.decay_tokens == 10 * 4 * 32);
  CHECK(r.batch.rampup.start == 0);
  CHECK(r.data.split == std::vector<double>{1, 0, 0});
  CHECK(r.data.seed == 1234);
  CHECK(r.data.shuffle);
  CHECK(r.data.cache_dir == cwd_path("cache"));
  CHECK(r.checkpoint.dir.empty());
  CHECK(r.checkpoint.save_interval == 0);
  CHECK(r.checkpoint.keep_last == 0);
  CHECK_FALSE(r.checkpoint.async);
  CHECK_FALSE(r.checkpoint.resume);
  CHECK(r.checkpoint.load.empty());
  CHECK(r.checkpoint.load_optimizer);
  CHECK(r.checkpoint.load_iteration == -1);
  CHECK(r.tokenizer.vocab_file.empty());
  CHECK(r.schedule.exit_duration_minutes == 0.0);
  CHECK(r.logging.interval == 10);
  CHECK(r.logging.metrics_file == cwd_path("metrics.jsonl"));
  CHECK(r.eval.interval == 0);
  CHECK(r.eval.iters == 0);
  CHECK(r.seed == 1234);

  SECTION("decay_tokens defaults to train_tokens when it is given") {
    const Recipe t = parse_recipe(kMinimalRecipe, {"schedule={train_tokens: 5e6}"});
    CHECK(t.schedule.decay_tokens == 5'000'000);
    CHECK(t.schedule.train_iters == 0);
  }
  SECTION("a null value means the default") {
    const Recipe t = parse_recipe(kMinimalRecipe, {"model.vocab_size=~", "parallel="});
    CHECK(t.model.vocab_size == 50257);
    CHECK(t.parallel.tensor == 1);
  }
}

TEST_CASE("integers accept exact 1e9-style floats and booleans YAML's spellings", "[config]") {
  const Recipe r =
      parse_recipe(kMinimalRecipe, {"schedule.train_tokens=270e9", "schedule.warmup_tokens=1.5e3",
                                    "seed=+7", "data.shuffle=no", "checkpoint.async=True"});
  CHECK(r.schedule.train_tokens == 270'000'000'000);
  CHECK(r.schedule.warmup_tokens == 1500);
  CHECK(r.seed == 7);
  CHECK_FALSE(r.data.shuffle);
  CHECK(r.checkpoint.async);
}

TEST_CASE("overrides set keys - lists - list entries and sections", "[config]") {
  SECTION("a scalar") {
    const Recipe r = parse_recipe(kMinimalRecipe, {"model.hidden_size=128", "precision=fp16"});
    CHECK(r.model.hidden_size == 128);
    CHECK(r.model.ffn_hidden_size == 512);  // the default follows the override
    CHECK(r.precision == Precision::kFP16);
  }
  SECTION("a list of numbers") {
    const Recipe r = parse_recipe(kMinimalRecipe, {"optimizer.betas=[0.9,0.95]"});
    CHECK(r.optimizer.beta1 == 0.9);
    CHECK(r.optimizer.beta2 == 0.95);
  }
  SECTION("a list of maps") {
    const Recipe r = parse_recipe(
        kMinimalRecipe, {"data.blend=[{prefix: /d/x, weight: 1}, {prefix: /d/y, weight: 3}]"});
    REQUIRE(r.data.blend.size() == 2);
    CHECK(r.data.blend[1].prefix == "/d/y");
    CHECK(r.data.blend[1].weight == 3.0);
  }
  SECTION("one entry of a list, by index") {
    const Recipe r = parse_recipe(
        kMinimalRecipe, {"data.blend.0.weight=2.5", "data.split=[1,1,1]", "data.split.2=0"});
    CHECK(r.data.blend[0].weight == 2.5);
    CHECK(r.data.split == std::vector<double>{1, 1, 0});
  }
  SECTION("a whole section, and a section the recipe leaves out") {
    const Recipe r =
        parse_recipe(kMinimalRecipe, {"optimizer={lr: 0.5, min_lr: 0.25}", "batch.rampup.start=2",
                                      "batch.rampup.increment=2", "batch.rampup.tokens=1000"});
    CHECK(r.optimizer.lr == 0.5);
    CHECK(r.optimizer.min_lr == 0.25);
    CHECK(r.batch.rampup.start == 2);
    CHECK(r.batch.rampup.tokens == 1000);
  }
  SECTION("the last override of a key wins, and the value may hold '='") {
    const Recipe r = parse_recipe(kMinimalRecipe, {"seed=1", "seed=2", "data.blend.0.prefix=/a=b"});
    CHECK(r.seed == 2);
    CHECK(r.data.blend[0].prefix == "/a=b");
  }
  SECTION("Megatron's split string") {
    const Recipe r = parse_recipe(kMinimalRecipe, {"data.split=969, 30, 1"});
    CHECK(r.data.split == std::vector<double>{969, 30, 1});
    const Recipe s = parse_recipe(kMinimalRecipe, {"data.split=\"98/2/0\""});
    CHECK(s.data.split == std::vector<double>{98, 2, 0});
  }
}

TEST_CASE("relative paths resolve against the working directory", "[config]") {
  const Recipe r =
      parse_recipe(kMinimalRecipe, {"model.init_from=models/gpt2.safetensors",
                                    "data.blend=[{prefix: data/x_text_document, weight: 1}, "
                                    "{prefix: /abs/y, weight: 1}]",
                                    "data.cache_dir=./c", "checkpoint.dir=ck/../ckpt",
                                    "logging.metrics_file=runs/m.jsonl"});
  CHECK(r.model.init_from == cwd_path("models/gpt2.safetensors"));
  CHECK(r.data.blend[0].prefix == cwd_path("data/x_text_document"));
  CHECK(r.data.blend[1].prefix == "/abs/y");
  CHECK(r.data.cache_dir == cwd_path("c"));
  CHECK(r.checkpoint.dir == cwd_path("ckpt"));
  CHECK(r.logging.metrics_file == cwd_path("runs/m.jsonl"));
  CHECK(std::filesystem::path(r.data.cache_dir).is_absolute());
}

TEST_CASE("recipe_to_yaml round-trips to an equal Recipe", "[config]") {
  std::vector<Recipe> recipes = {
      parse_recipe(kFullRecipe, {}),
      parse_recipe(kMinimalRecipe, {}),
      // Awkward doubles and a path YAML would otherwise misread.
      parse_recipe(kMinimalRecipe,
                   {"model.init_method_std=0.30000000000000004", "optimizer.lr=1e-300",
                    "optimizer.min_lr=0", "data.blend.0.prefix='/tmp/a b: #c\"d\\e'"}),
      load_recipe(test::source_path("configs/530b.yaml"), {}),
      load_recipe(test::source_path("configs/demo-cpu.yaml"), {}),
      load_recipe(test::source_path("configs/tiny.yaml"), {}),
      parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true"}),
  };
  CHECK(recipes.back().parallel.cuda_graph);
  CHECK_THAT(recipe_to_yaml(recipes.back()), Catch::Contains("  cuda_graph: true"));
  CHECK(recipes[2].data.blend[0].prefix == "/tmp/a b: #c\"d\\e");
  for (const Recipe& r : recipes) {
    const std::string yaml = recipe_to_yaml(r);
    INFO(yaml);
    const Recipe back = parse_recipe(yaml, {}, "<round trip>");
    test::require_same_recipe(r, back);
    CHECK(recipe_to_yaml(back) == yaml);
  }
}

TEST_CASE("recipe_to_yaml writes every key in schema order", "[config]") {
  const std::string yaml = recipe_to_yaml(parse_recipe(kMinimalRecipe, {}));
  size_t at = 0;
  for (const char* key : {"model:",
                          "  num_layers: 2",
                          "  ffn_hidden_size: 256",
                          "  activation: gelu",
                          "  init_from: \"\"",
                          "parallel:",
                          "  data: 0",
                          "precision: fp32",
                          "optimizer:",
                          "  betas: [0.9, 0.999]",
                          "schedule:",
                          "  decay_tokens: 1280",
                          "batch:",
                          "  rampup:",
                          "    start: 0",
                          "data:",
                          "  blend:",
                          "    - prefix: \"/data/x\"",
                          "      weight: 1.0",
                          "  split: [1.0, 0.0, 0.0]",
                          "checkpoint:",
                          "logging:",
                          "eval:",
                          "tokenizer:",
                          "  merge_file: \"\"",
                          "seed: 1234"}) {
    const size_t found = yaml.find(key, at);
    INFO(key << "\n" << yaml);
    REQUIRE(found != std::string::npos);
    at = found;
  }
}

TEST_CASE("the recipes in configs/ load", "[config]") {
  SECTION("530b: the paper's recipe") {
    const Recipe r = load_recipe(test::source_path("configs/530b.yaml"), {});
    CHECK(r.model.num_layers == 105);
    CHECK(r.model.hidden_size == 20480);
    CHECK(r.model.num_attention_heads == 128);
    CHECK(r.model.ffn_hidden_size == 81920);
    CHECK(r.model.init_method_std == 4.0e-3);
    CHECK(r.parallel.tensor * r.parallel.pipeline * r.parallel.data == 2240);
    CHECK(r.parallel.zero_stage == 1);
    CHECK(r.precision == Precision::kBF16);
    CHECK(r.padded_vocab_size() == 51200);
    CHECK(r.schedule.warmup_tokens == 1'000'000'000);
    CHECK(r.schedule.decay_tokens == 340'000'000'000);
    CHECK(r.schedule.train_tokens == 270'000'000'000);
    CHECK(r.batch.global_batch_size == 1920);
    CHECK(r.batch.rampup.start == 32);
    CHECK(r.batch.rampup.increment == 32);
    CHECK(r.batch.rampup.tokens == 12'000'000'000);
    REQUIRE(r.data.blend.size() == 15);
    double total = 0;
    for (const BlendEntry& e : r.data.blend) total += e.weight;
    CHECK(total == Approx(100.1));
    CHECK(r.data.blend[0].prefix == cwd_path("data/mtnlg/books3_text_document"));
    CHECK(r.data.split == std::vector<double>{949, 50, 1});
    CHECK(r.eval.interval == 1000);
    CHECK(r.seed == 1234);
  }
  SECTION("demo-cpu") {
    const Recipe r = load_recipe(test::source_path("configs/demo-cpu.yaml"), {});
    CHECK(r.model.num_layers == 4);
    CHECK(r.model.hidden_size == 256);
    CHECK(r.model.hidden_dropout == 0.0);
    CHECK(r.padded_vocab_size() == 50304);
    CHECK(r.parallel.micro_batch_size == 4);
    CHECK(r.batch.global_batch_size == 8);
    CHECK(r.schedule.train_iters == 300);
    CHECK(r.schedule.decay_tokens == 300 * 8 * 128);
    CHECK(r.data.split == std::vector<double>{98, 2, 0});
    CHECK(r.logging.metrics_file == cwd_path("runs/demo-cpu/metrics.jsonl"));
    CHECK_NOTHROW(check_supported(r));
  }
  SECTION("tiny") {
    const Recipe r = load_recipe(test::source_path("configs/tiny.yaml"), {});
    CHECK(r.model.hidden_size == 64);
    CHECK(r.model.vocab_size == 512);
    CHECK(r.padded_vocab_size() == 512);
    CHECK(r.optimizer.lr == 3e-3);
    CHECK(r.schedule.train_iters == 50);
    CHECK_NOTHROW(check_supported(r));
  }
}

TEST_CASE("check_supported accepts every feature of the recipe today", "[config]") {
  const std::string tiny = test::source_path("configs/tiny.yaml");
  CHECK_NOTHROW(check_supported(load_recipe(tiny, {"precision=fp16"})));
  CHECK_NOTHROW(
      check_supported(load_recipe(tiny, {"precision=bf16", "parallel.grad_reduce_dtype=bf16"})));
  CHECK_NOTHROW(check_supported(load_recipe(tiny, {"precision=bf16"})));
  CHECK_NOTHROW(
      check_supported(load_recipe(tiny, {"checkpoint={dir: /tmp/ck, save_interval: 10}"})));
  CHECK_NOTHROW(check_supported(load_recipe(tiny, {"checkpoint={dir: /tmp/ck, resume: true}"})));
  CHECK_NOTHROW(check_supported(load_recipe(
      tiny, {"parallel.pipeline=2", "parallel.virtual_pipeline=2", "model.num_layers=4"})));
}

TEST_CASE("padded_vocab_size rounds up to make_vocab_size_divisible_by * tensor", "[config]") {
  Recipe r;
  r.model.vocab_size = 50257;
  r.model.make_vocab_size_divisible_by = 128;
  r.parallel.tensor = 1;
  CHECK(r.padded_vocab_size() == 50304);
  r.parallel.tensor = 8;
  CHECK(r.padded_vocab_size() == 51200);
  r.model.vocab_size = 51200;
  CHECK(r.padded_vocab_size() == 51200);
  r.model.make_vocab_size_divisible_by = 1;
  r.parallel.tensor = 1;
  r.model.vocab_size = 50257;
  CHECK(r.padded_vocab_size() == 50257);
}

TEST_CASE("enum names", "[config]") {
  CHECK(std::string(precision_name(Precision::kFP32)) == "fp32");
  CHECK(std::string(precision_name(Precision::kBF16)) == "bf16");
  CHECK(std::string(precision_name(Precision::kFP16)) == "fp16");
  CHECK(std::string(decay_style_name(DecayStyle::kCosine)) == "cosine");
  CHECK(std::string(decay_style_name(DecayStyle::kLinear)) == "linear");
  CHECK(std::string(decay_style_name(DecayStyle::kConstant)) == "constant");
  CHECK(std::string(activation_name(Activation::kGelu)) == "gelu");
  CHECK(std::string(activation_name(Activation::kGeluTanh)) == "gelu_tanh");
}

}  // namespace
}  // namespace mtnlg
