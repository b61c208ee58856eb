// Every recipe error: unknown keys, wrong types, missing keys, YAML syntax, missing files,
// impossible values and layout divisibility. Each asserts the key path (context) and that the
// message names the numbers or the fix.
#include <catch2/catch.hpp>

#include "config/recipe_test_util.h"
#include "core/config/recipe.h"
#include "test_util.h"

namespace mtnlg {
namespace {

using test::expect_recipe_error;
using test::kMinimalRecipe;
using test::recipe_error;

TEST_CASE("unknown keys are rejected with the valid keys and a typo suggestion", "[config]") {
  expect_recipe_error({"model.hiden_size=64"}, "model.hiden_size",
                      {"unknown key 'hiden_size' in model", "did you mean 'hidden_size'?",
                       "Valid keys: num_layers, hidden_size, num_attention_heads"});
  expect_recipe_error({"optimizer.lr_min=0.1"}, "optimizer.lr_min", {"did you mean 'min_lr'?"});
  expect_recipe_error({"batch.rampup.strat=2"}, "batch.rampup.strat",
                      {"did you mean 'start'?", "start, increment, tokens"});
  expect_recipe_error({"data.blend.0.prefx=a"}, "data.blend[0].prefx",
                      {"did you mean 'prefix'?", "prefix, weight"});
  expect_recipe_error({"modle.num_layers=2"}, "modle",
                      {"at the top level", "did you mean 'model'?", "parallel", "seed"});

  SECTION("no suggestion when nothing is close") {
    const Error e = recipe_error({"parallel.banana=1"});
    CHECK(e.context() == "parallel.banana");
    CHECK_THAT(e.message(), !Catch::Contains("did you mean"));
    CHECK_THAT(e.message(), Catch::Contains("remove it or fix its spelling"));
    CHECK_THAT(e.message(), Catch::Contains("tensor, pipeline, data, micro_batch_size"));
  }
  SECTION("in the YAML text, and in a list entry") {
    expect_recipe_error({}, "eval.intervall", {"did you mean 'interval'?"},
                        std::string(kMinimalRecipe) + "eval: {intervall: 3}\n");
    expect_recipe_error({}, "data.blend[1].wieght", {"did you mean 'weight'?"},
                        R"(
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 32}
schedule: {train_iters: 10}
batch: {global_batch_size: 4}
data: {blend: [{prefix: /a}, {prefix: /b, wieght: 2}]}
)");
  }
  SECTION("a key given twice") {
    expect_recipe_error({}, "seed", {"appears twice"},
                        std::string(kMinimalRecipe) + "seed: 1\nseed: 2\n");
  }
}

TEST_CASE("wrong types are rejected", "[config]") {
  expect_recipe_error({"model.hidden_size=abc"}, "model.hidden_size",
                      {"expected an integer", "abc"});
  expect_recipe_error({"model.hidden_size='64'"}, "model.hidden_size",
                      {"expected an integer", "remove the quotes"});
  expect_recipe_error({"model.num_layers=1.5"}, "model.num_layers",
                      {"expected an integer, got 1.5", "whole number"});
  expect_recipe_error({"schedule.train_tokens=2.5e-1"}, "schedule.train_tokens",
                      {"expected an integer"});
  expect_recipe_error({"model.seq_length=[32]"}, "model.seq_length",
                      {"expected an integer, got a list"});
  expect_recipe_error({"optimizer.lr=fast"}, "optimizer.lr", {"expected a finite number"});
  expect_recipe_error({"optimizer.lr=.inf"}, "optimizer.lr", {"finite"});
  expect_recipe_error({"data.shuffle=maybe"}, "data.shuffle", {"expected true or false"});
  expect_recipe_error({"model.init_from={a: 1}"}, "model.init_from",
                      {"expected a string, got a map"});
  expect_recipe_error({"data.blend={prefix: x, weight: 1}"}, "data.blend",
                      {"expected a list of maps", "got a map"});
  expect_recipe_error({"data.blend=[x]"}, "data.blend[0]", {"expected a map", "prefix, weight"});
  expect_recipe_error({"model=3"}, "model", {"expected a map", "num_layers"});
  expect_recipe_error({"optimizer.betas=0.9"}, "optimizer.betas", {"two numbers", "[0.9, 0.95]"});
  expect_recipe_error({"optimizer.betas=[0.9]"}, "optimizer.betas", {"two numbers"});
  expect_recipe_error({"optimizer.betas=[0.9, x]"}, "optimizer.betas[1]", {"expected a finite"});
  expect_recipe_error({"data.split=[1, 2]"}, "data.split", {"three numbers", "[949, 50, 1]"});
  expect_recipe_error({"data.split=a,b,c"}, "data.split", {"not a list of numbers", "949,50,1"});
  expect_recipe_error({"seed=-1"}, "seed", {"non-negative"});
  expect_recipe_error({"model.activation=relu"}, "model.activation",
                      {"'relu' is not one of gelu, gelu_tanh"});
  expect_recipe_error({"precision=fp4"}, "precision", {"not one of fp32, bf16, fp16, fp8"});
  expect_recipe_error({"precision=fp8", "fp8.format=e5m2"}, "fp8.format",
                      {"'e5m2' is not one of hybrid, e4m3"});
  expect_recipe_error({"precision=fp8", "fp8.scaling=tensorwise"}, "fp8.scaling",
                      {"not one of delayed, current"});
  expect_recipe_error({"precision=fp8", "fp8.amax_compute_algo=mean"}, "fp8.amax_compute_algo",
                      {"not one of max, most_recent"});
  expect_recipe_error({"precision=fp8", "fp8.amax_history_len=0"}, "fp8.amax_history_len",
                      {"must be positive"});
  expect_recipe_error({"precision=fp8", "fp8.amax_history_len=2000000"}, "fp8.amax_history_len",
                      {"more than 1000000", "1024"});
  expect_recipe_error({"precision=fp8", "fp8.margin=-1"}, "fp8.margin", {"-1"});
  expect_recipe_error({"precision=fp8", "fp8.margin=65"}, "fp8.margin", {"more than 64"});
  expect_recipe_error({"precision=fp8", "fp8.cache_weights=sometimes"}, "fp8.cache_weights",
                      {"sometimes"});
  expect_recipe_error({"precision=fp8", "fp8.amax_history=16"}, "fp8.amax_history",
                      {"unknown key", "amax_history_len"});
  // An fp8: section a bf16 recipe would ignore is refused.
  expect_recipe_error({"precision=bf16", "fp8.format=e4m3"}, "fp8",
                      {"precision: fp8 only", "set precision: fp8 or remove the fp8: section"});
  expect_recipe_error({"device=tpu"}, "device", {"not one of auto, cpu, cuda"});
  expect_recipe_error({"schedule.decay_style=exp"}, "schedule.decay_style",
                      {"not one of cosine, linear, constant"});
  SECTION("a recipe that is not a map") {
    const Error e = recipe_error({}, "- a\n- b\n");
    CHECK(e.context() == "test.yaml");
    CHECK_THAT(e.message(), Catch::Contains("map of sections"));
  }
}

TEST_CASE("missing required keys are named", "[config]") {
  const auto without = [](const std::string& line) {
    std::string yaml = kMinimalRecipe;
    const size_t at = yaml.find(line);
    REQUIRE(at != std::string::npos);
    return yaml.erase(at, line.size());
  };
  expect_recipe_error({}, "model.num_layers", {"required key is missing", "set model.num_layers"},
                      without("num_layers: 2, "));
  expect_recipe_error({}, "model.hidden_size", {"set model.hidden_size"},
                      without("hidden_size: 64, "));
  expect_recipe_error({}, "model.num_attention_heads", {"set model.num_attention_heads"},
                      without("num_attention_heads: 4, "));
  expect_recipe_error({}, "model.seq_length", {"set model.seq_length"},
                      without(", seq_length: 32"));
  expect_recipe_error({}, "batch.global_batch_size", {"set batch.global_batch_size"},
                      without("batch: {global_batch_size: 4}"));
  expect_recipe_error({}, "data.blend", {"set data.blend"},
                      without("data: {blend: [{prefix: /data/x, weight: 1}]}"));
  expect_recipe_error({}, "schedule.train_tokens",
                      {"schedule.train_tokens", "schedule.train_iters"},
                      without("schedule: {train_iters: 10}"));
  expect_recipe_error({"data.blend=[{weight: 1}]"}, "data.blend[0].prefix",
                      {"required key is missing"});
  expect_recipe_error({}, "model.num_layers", {"required key is missing"}, "");
}

TEST_CASE("YAML syntax errors name the file and line", "[config]") {
  const Error e = recipe_error({}, "model:\n  num_layers: 2\n  hidden_size: [64\nseed: 1\n");
  CHECK(e.code() == Code::kInvalidArgument);
  CHECK_THAT(e.context(), Catch::StartsWith("test.yaml:"));
  CHECK_THAT(e.message(), Catch::Contains("YAML syntax error at line"));

  const Error tab = recipe_error({}, "model:\n  a: 1\n b: 2\n");
  CHECK(tab.context() == "test.yaml:3");
  CHECK_THAT(tab.message(), Catch::Contains("line 3"));
}

TEST_CASE("a top-level key that is not a name names the file and line", "[config]") {
  // ": x" is a null key (found by tests/cmd/fuzz_inputs.py): no key path to name, so the file.
  const Error e = recipe_error({}, "model:\n  num_layers: 2\n: x\n");
  CHECK(e.context() == "test.yaml");
  CHECK_THAT(e.message(), Catch::Contains("a key must be a plain name, got nothing (line 3)"));
  // Inside a section the path names it.
  const Error in_model = recipe_error({}, "model:\n  ? [a, b]\n  : 1\n");
  CHECK(in_model.context() == "model");
}

TEST_CASE("a missing recipe file is kNotFound naming it", "[config]") {
  test::TempDir dir;
  const std::string path = dir.file("nope.yaml");
  try {
    load_recipe(path, {});
    FAIL("load_recipe accepted a missing file");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK(e.context() == path);
    CHECK_THAT(e.message(), Catch::Contains(path));
  }
  SECTION("and a file on disk is read, with its name in syntax errors") {
    const std::string bad = dir.file("bad.yaml");
    test::write_file(bad, "model: {num_layers: 2\n");
    try {
      load_recipe(bad, {});
      FAIL("load_recipe accepted bad YAML");
    } catch (const Error& e) {
      CHECK_THAT(e.context(), Catch::StartsWith(bad + ":"));
    }
    const std::string good = dir.file("good.yaml");
    test::write_file(good, kMinimalRecipe);
    CHECK(load_recipe(good, {"seed=5"}).seed == 5);
  }
}

TEST_CASE("malformed and unknown overrides are named", "[config]") {
  expect_recipe_error({"model.hidden_size"}, "model.hidden_size",
                      {"override 'model.hidden_size' is not KEY.PATH=VALUE"});
  expect_recipe_error({"=5"}, "=5", {"is not KEY.PATH=VALUE"});
  expect_recipe_error({"model..hidden_size=5"}, "model..hidden_size=5", {"KEY.PATH=VALUE"});
  expect_recipe_error({"seed.x=1"}, "seed.x", {"single value", "--set seed=VALUE"});
  expect_recipe_error({"data.blend.3.weight=1"}, "data.blend.3", {"has 1 entries"});
  expect_recipe_error({"data.blend.x=1"}, "data.blend.x", {"not an entry index"});
  expect_recipe_error({"optimizer.betas=[0.9,"}, "optimizer.betas=[0.9,", {"not valid YAML"});
  expect_recipe_error({"model.num_layerz=3"}, "model.num_layerz", {"did you mean 'num_layers'?"});
}

TEST_CASE("impossible values are rejected with the fix", "[config]") {
  for (const char* key :
       {"model.num_layers", "model.hidden_size", "model.num_attention_heads",
        "model.ffn_hidden_size", "model.seq_length", "model.max_position_embeddings",
        "model.vocab_size", "model.make_vocab_size_divisible_by", "parallel.tensor",
        "parallel.pipeline", "parallel.micro_batch_size", "batch.global_batch_size"}) {
    expect_recipe_error({std::string(key) + "=0"}, key, {"0 must be positive"});
    expect_recipe_error({std::string(key) + "=-4"}, key, {"-4 must be positive"});
  }
  expect_recipe_error({"parallel.data=-1"}, "parallel.data", {"must be 0"});
  expect_recipe_error({"model.layernorm_epsilon=0"}, "model.layernorm_epsilon", {"positive"});
  expect_recipe_error({"model.init_method_std=-0.02"}, "model.init_method_std", {"positive"});
  expect_recipe_error({"model.hidden_dropout=1.0"}, "model.hidden_dropout", {"[0, 1)", "0.1"});
  expect_recipe_error({"model.attention_dropout=-0.1"}, "model.attention_dropout", {"[0, 1)"});
  expect_recipe_error({"optimizer.lr=-1e-4"}, "optimizer.lr", {"-0.0001 is negative"});
  expect_recipe_error({"optimizer.min_lr=-1"}, "optimizer.min_lr", {"negative"});
  expect_recipe_error({"optimizer={lr: 1e-4, min_lr: 1e-3}"}, "optimizer.min_lr",
                      {"0.001 is greater than optimizer.lr: 0.0001", "min_lr <= lr"});
  expect_recipe_error({"optimizer.betas=[1.0, 0.95]"}, "optimizer.betas",
                      {"[1, 0.95] must both be in [0, 1)"});
  expect_recipe_error({"optimizer.betas=[0.9, -0.1]"}, "optimizer.betas", {"[0, 1)"});
  expect_recipe_error({"optimizer.eps=0"}, "optimizer.eps", {"must be positive"});
  expect_recipe_error({"optimizer.weight_decay=-0.1"}, "optimizer.weight_decay", {"negative"});
  expect_recipe_error({"optimizer.clip_grad=-1"}, "optimizer.clip_grad", {"0 to disable"});
  // Derived (not set): the message names the keys it came from, and blames the warmup.
  expect_recipe_error({"schedule={warmup_tokens: 2000, train_iters: 10}"}, "schedule.warmup_tokens",
                      {"longer than the whole run", "schedule.train_iters 10"});
  expect_recipe_error({"schedule={warmup_tokens: 2000, decay_tokens: 1000, train_iters: 10}"},
                      "schedule.decay_tokens", {"1000 is less than schedule.warmup_tokens: 2000"});
  expect_recipe_error({"schedule.warmup_tokens=-1"}, "schedule.warmup_tokens", {"negative"});
  expect_recipe_error({"schedule.train_iters=0"}, "schedule.train_tokens", {"both 0"});
  expect_recipe_error({"logging.interval=0"}, "logging.interval", {"at least 1"});
  expect_recipe_error({"optimizer.loss_scale=-1"}, "optimizer.loss_scale", {"negative", "dynamic"});
  expect_recipe_error({"optimizer.initial_loss_scale=0"}, "optimizer.initial_loss_scale",
                      {"positive", "2^32"});
  expect_recipe_error({"optimizer.loss_scale_window=0"}, "optimizer.loss_scale_window",
                      {"at least 1"});
  expect_recipe_error({"optimizer.hysteresis=0"}, "optimizer.hysteresis", {"at least 1"});
  expect_recipe_error({"optimizer.min_loss_scale=0"}, "optimizer.min_loss_scale", {"positive"});
  expect_recipe_error({"optimizer.min_loss_scale=8", "optimizer.initial_loss_scale=4"},
                      "optimizer.min_loss_scale", {"above optimizer.initial_loss_scale"});
  expect_recipe_error({"parallel.grad_reduce_dtype=bf16"}, "parallel.grad_reduce_dtype",
                      {"needs precision: bf16"});
  expect_recipe_error({"parallel.grad_reduce_dtype=fp16"}, "parallel.grad_reduce_dtype", {"fp32"});
  expect_recipe_error({"parallel.transport=infiniband"}, "parallel.transport",
                      {"auto", "shm", "tcp", "gloo"});
  expect_recipe_error({"model.attention_backend=flash"}, "model.attention_backend",
                      {"auto", "cudnn", "flash2", "blocked"});
  expect_recipe_error({"logging.metrics_file=\"\""}, "logging.metrics_file",
                      {"is empty", "metrics.jsonl"});
  expect_recipe_error({"data.split=[0, 0, 0]"}, "data.split", {"gives training no data"});
  expect_recipe_error({"data.split=0,5,5"}, "data.split", {"first (train) share positive"});
  expect_recipe_error({"data.split=[1, -1, 0]"}, "data.split", {"non-negative"});
  expect_recipe_error({"data.blend.0.weight=0"}, "data.blend[0].weight", {"must be positive"});
  expect_recipe_error({"data.blend.0.weight=-2"}, "data.blend[0].weight", {"must be positive"});
  expect_recipe_error({"data.blend.0.prefix=''"}, "data.blend[0].prefix", {"prefix is empty"});
  expect_recipe_error({"data.blend=[]"}, "data.blend", {"data.blend is empty"});
  expect_recipe_error({"checkpoint.save_interval=100"}, "checkpoint.dir",
                      {"save_interval is 100", "set checkpoint.dir"});
  expect_recipe_error({"checkpoint.resume=true"}, "checkpoint.dir", {"set checkpoint.dir"});
  // Every setting that needs the directory is named at once, with the --set that turns each off.
  expect_recipe_error({"checkpoint.save_interval=100", "checkpoint.resume=true",
                       "schedule.exit_duration_minutes=60"},
                      "checkpoint.dir",
                      {"checkpoint.save_interval is 100; checkpoint.resume is true",
                       "schedule.exit_duration_minutes is 60",
                       "--set checkpoint.save_interval=0 --set checkpoint.resume=false --set "
                       "schedule.exit_duration_minutes=0"});
  expect_recipe_error({"checkpoint.keep_last=-1"}, "checkpoint.keep_last", {"negative"});
  expect_recipe_error(
      {"checkpoint.dir=/c", "checkpoint.resume=true", "checkpoint.load_iteration=-2"},
      "checkpoint.load_iteration", {"-2", "-1 (the default) for the latest"});
  expect_recipe_error({"checkpoint.load_iteration=5"}, "checkpoint.load_iteration",
                      {"nothing is loaded", "checkpoint.resume: true"});
  expect_recipe_error({"tokenizer.vocab_file=/t/encoder.json"}, "tokenizer.merge_file",
                      {"tokenizer.vocab_file is set but tokenizer.merge_file is not"});
  expect_recipe_error({"tokenizer.merge_file=/t/vocab.bpe"}, "tokenizer.vocab_file",
                      {"tokenizer.merge_file is set but tokenizer.vocab_file is not"});
  // Counts that would overflow the products formed from them (tokens, samples) or that no machine
  // could allocate are refused naming the key, before anything is derived from them.
  expect_recipe_error({"schedule.train_iters=144115188075855875"}, "schedule.train_iters",
                      {"largest this build takes"});
  expect_recipe_error({"model.seq_length=9223372036854775807"}, "model.seq_length",
                      {"largest this build takes"});
  expect_recipe_error({"eval.iters=9223372036854775807"}, "eval.iters", {"2^30"});
  expect_recipe_error({"parallel.data=9223372036854775807"}, "parallel.data", {"2^24"});
  expect_recipe_error({"model.hidden_size=2147483648"}, "model.hidden_size", {"2^20"});
  expect_recipe_error({"model.vocab_size=4294967296"}, "model.vocab_size", {"int32"});
  expect_recipe_error({"batch.global_batch_size=2147483648"}, "batch.global_batch_size", {"2^30"});
  // In range one by one, past 2^60 tokens together.
  expect_recipe_error({"schedule.train_iters=1099511627776", "batch.global_batch_size=1048576",
                       "model.seq_length=4096", "model.max_position_embeddings=4096"},
                      "schedule.train_iters", {"overflows 64-bit"});
  expect_recipe_error({"schedule.train_iters=1099511627776", "batch.global_batch_size=1024",
                       "model.seq_length=4096", "model.max_position_embeddings=4096"},
                      "schedule.train_iters", {"more than 2^60"});
  expect_recipe_error({"optimizer.weight_decay=1e300"}, "optimizer.weight_decay",
                      {"zero or flip the weights"});
  expect_recipe_error({"parallel.timeout_s=10000000000"}, "parallel.timeout_s",
                      {"more than 30 days", "at most 2592000"});
  expect_recipe_error({"schedule.exit_duration_minutes=-5"}, "schedule.exit_duration_minutes",
                      {"must not be negative"});
  expect_recipe_error({"checkpoint.load_optimizer=maybe"}, "checkpoint.load_optimizer", {});
  expect_recipe_error({"parallel.zero_stage=2"}, "parallel.zero_stage", {"use 0", "or 1"});
  expect_recipe_error({"parallel.timeout_s=0"}, "parallel.timeout_s", {"must be positive"});
  expect_recipe_error({"parallel.grad_bucket_mb=0"}, "parallel.grad_bucket_mb",
                      {"must be positive", "MiB"});
  expect_recipe_error({"parallel.virtual_pipeline=2"}, "parallel.virtual_pipeline",
                      {"needs parallel.pipeline > 1"});
  expect_recipe_error({"parallel.virtual_pipeline=2", "parallel.pipeline=2"},
                      "parallel.virtual_pipeline",
                      {"model.num_layers: 2 does not divide", "= 4 model chunks"});
  expect_recipe_error({"parallel.virtual_pipeline=0"}, "parallel.virtual_pipeline",
                      {"must be positive"});
  expect_recipe_error({"parallel.overlap_grad_reduce=maybe"}, "parallel.overlap_grad_reduce", {});
  expect_recipe_error({"parallel.sequence_parallel=true", "parallel.tensor=4",
                       "model.seq_length=30", "model.max_position_embeddings=32"},
                      "parallel.sequence_parallel",
                      {"parallel.tensor: 4 does not divide model.seq_length: 30"});
  expect_recipe_error({"parallel.sequence_parallel=yes please"}, "parallel.sequence_parallel", {});
  expect_recipe_error({"model.max_position_embeddings=16"}, "model.max_position_embeddings",
                      {"16 is less than model.seq_length: 32", "at least 32"});
  expect_recipe_error({"eval.interval=10", "data.split=[9,1,0]"}, "eval.iters",
                      {"eval.iters is 0"});
  expect_recipe_error({"eval={interval: 10, iters: 5}"}, "data.split",
                      {"no validation share", "eval.interval: 0"});
}

TEST_CASE("layout divisibility errors name the numbers", "[config]") {
  expect_recipe_error({"model.hidden_size=20480", "model.num_attention_heads=100"},
                      "model.num_attention_heads",
                      {"model.num_attention_heads: 100 does not divide model.hidden_size: 20480"});
  expect_recipe_error({"parallel.tensor=8"}, "parallel.tensor",
                      {"parallel.tensor: 8 does not divide model.num_attention_heads: 4"});
  expect_recipe_error({"parallel.tensor=4", "model.ffn_hidden_size=258"}, "parallel.tensor",
                      {"parallel.tensor: 4 does not divide model.ffn_hidden_size: 258"});
  expect_recipe_error({"parallel.pipeline=3"}, "parallel.pipeline",
                      {"parallel.pipeline: 3 does not divide model.num_layers: 2"});
  expect_recipe_error({"parallel={micro_batch_size: 2, data: 4}"}, "batch.global_batch_size",
                      {"4 is not a multiple of parallel.micro_batch_size * parallel.data: 8"});
  expect_recipe_error({"parallel.micro_batch_size=3"}, "batch.global_batch_size",
                      {"4 is not a multiple of parallel.micro_batch_size: 3"});

  const std::vector<std::string> big = {"batch.global_batch_size=64",
                                        "parallel={micro_batch_size: 2, data: 2}"};
  const auto with = [&](const std::string& ramp) {
    std::vector<std::string> o = big;
    o.push_back("batch.rampup=" + ramp);
    return o;
  };
  CHECK_NOTHROW(parse_recipe(kMinimalRecipe, with("{start: 16, increment: 8, tokens: 1e6}")));
  expect_recipe_error(with("{start: 64, increment: 8, tokens: 1e6}"), "batch.rampup.start",
                      {"64 must be less than batch.global_batch_size: 64"});
  expect_recipe_error(with("{start: 16, increment: 20, tokens: 1e6}"), "batch.rampup.increment",
                      {"20 does not divide batch.global_batch_size: 64 - batch.rampup.start: 16 "
                       "= 48"});
  expect_recipe_error(with("{start: 6, increment: 2, tokens: 1e6}"), "batch.rampup.start",
                      {"6 is not a multiple of parallel.micro_batch_size * parallel.data: 4"});
  expect_recipe_error(with("{start: 8, increment: 2, tokens: 1e6}"), "batch.rampup.increment",
                      {"2 is not a multiple of parallel.micro_batch_size * parallel.data: 4"});
  expect_recipe_error(with("{start: 16, increment: 8, tokens: 0}"), "batch.rampup.tokens",
                      {"0 must be positive"});
  expect_recipe_error(with("{start: 16, increment: 0, tokens: 1e6}"), "batch.rampup.increment",
                      {"must be positive"});
}

TEST_CASE("parallel.cuda_graph: one stage - data ranks reducing after backward - not fp8",
          "[config]") {
  CHECK_NOTHROW(check_supported(parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true"})));
  // Data parallelism with the reduction after backward: outside the captured micro-batch.
  for (const char* after : {"parallel.overlap_grad_reduce=false", "parallel.zero_stage=1"})
    CHECK_NOTHROW(check_supported(
        parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true", "parallel.data=2", after})));
  CHECK(cuda_graph_data_refusal(parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true"}), 1)
            .empty());
  CHECK_THAT(cuda_graph_data_refusal(parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true"}), 4),
             Catch::Contains("with 4 data-parallel ranks"));
  CHECK_NOTHROW(
      check_supported(parse_recipe(kMinimalRecipe, {"parallel.cuda_graph=true", "precision=fp16",
                                                    "parallel.activation_checkpointing=true"})));
  for (const std::vector<std::string>& sets : {std::vector<std::string>{"parallel.tensor=2"},
                                               {"parallel.pipeline=2"},
                                               {"parallel.data=2"},
                                               {"precision=fp8"}}) {
    std::vector<std::string> all = sets;
    all.push_back("parallel.cuda_graph=true");
    INFO(sets[0]);
    try {
      check_supported(parse_recipe(kMinimalRecipe, all, "test.yaml"));
      FAIL("expected a refusal");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kUnsupported);
      CHECK(e.context() == "parallel.cuda_graph");
      CHECK_THAT(e.what(), Catch::Contains("parallel.cuda_graph: false"));
      CHECK_THAT(e.what(), Catch::Contains(sets[0].substr(0, sets[0].find('='))));
    }
    CHECK_NOTHROW(check_supported(parse_recipe(kMinimalRecipe, sets, "test.yaml")));
  }
}

TEST_CASE("precision: fp8 is taken in every layout and on either device with its keys read",
          "[config]") {
  CHECK_NOTHROW(
      check_supported(parse_recipe(kMinimalRecipe, {"precision=fp8", "device=cuda"}, "test.yaml")));
  const Recipe ok = parse_recipe(
      kMinimalRecipe,
      {"precision=fp8", "fp8.format=e4m3", "fp8.scaling=current", "fp8.amax_history_len=16",
       "fp8.margin=1", "fp8.amax_compute_algo=most_recent", "fp8.cache_weights=false",
       "parallel.pipeline=2", "parallel.tensor=2", "parallel.sequence_parallel=true"},
      "test.yaml");
  CHECK_NOTHROW(check_supported(ok));
  CHECK(!ok.fp8.hybrid);
  CHECK(ok.fp8.scaling == Fp8ScalingMode::kCurrent);
  CHECK(ok.fp8.amax_history_len == 16);
  CHECK(ok.fp8.margin == 1);
  CHECK(ok.fp8.amax_algo == Fp8AmaxAlgo::kMostRecent);
  CHECK(!ok.fp8.cache_weights);
  CHECK(parse_recipe(kMinimalRecipe, {"precision=fp8"}, "test.yaml").fp8.cache_weights);
  CHECK(precision_dtype(ok.precision) == DType::kBF16);
  // The resolved recipe carries the section, and reads back the same.
  const std::string yaml = recipe_to_yaml(ok);
  CHECK_THAT(yaml, Catch::Contains("precision: fp8"));
  CHECK_THAT(yaml, Catch::Contains("amax_compute_algo: most_recent"));
  const Recipe again = parse_recipe(yaml, {}, "resolved.yaml");
  CHECK(again.fp8.amax_history_len == 16);
  CHECK(again.fp8.scaling == Fp8ScalingMode::kCurrent);
  CHECK(!again.fp8.cache_weights);
}

}  // namespace
}  // namespace mtnlg
