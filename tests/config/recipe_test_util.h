// Helpers shared by the recipe tests: a minimal valid recipe, error capture and a field-by-field
// Recipe comparison (Recipe has no operator==).
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/config/recipe.h"
#include "core/status.h"

namespace mtnlg::test {

// The smallest recipe parse_recipe accepts: only the required keys.
inline const char* const kMinimalRecipe = R"(
model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 32}
schedule: {train_iters: 10}
batch: {global_batch_size: 4}
data: {blend: [{prefix: /data/x, weight: 1}]}
)";

// The Error parse_recipe throws for `yaml` with `overrides`; fails the test if it accepts them.
inline Error recipe_error(const std::vector<std::string>& overrides,
                          const std::string& yaml = kMinimalRecipe) {
  try {
    parse_recipe(yaml, overrides, "test.yaml");
  } catch (const Error& e) {
    return e;
  }
  FAIL("parse_recipe accepted the recipe");
  return Error(Code::kInternal, "unreachable");
}

// Checks that the recipe with `overrides` fails with `context` and a message containing each of
// `mentions`.
inline void expect_recipe_error(const std::vector<std::string>& overrides,
                                const std::string& context,
                                const std::vector<std::string>& mentions,
                                const std::string& yaml = kMinimalRecipe,
                                Code code = Code::kInvalidArgument) {
  std::string what;
  for (const std::string& o : overrides) what += " --set " + o;
  INFO("overrides:" << what);
  const Error e = recipe_error(overrides, yaml);
  INFO("error: " << e.what());
  CHECK(e.code() == code);
  CHECK(e.context() == context);
  for (const std::string& m : mentions) CHECK_THAT(e.message(), Catch::Contains(m));
}

inline void require_same_recipe(const Recipe& a, const Recipe& b) {
  CHECK(a.model.num_layers == b.model.num_layers);
  CHECK(a.model.hidden_size == b.model.hidden_size);
  CHECK(a.model.num_attention_heads == b.model.num_attention_heads);
  CHECK(a.model.ffn_hidden_size == b.model.ffn_hidden_size);
  CHECK(a.model.seq_length == b.model.seq_length);
  CHECK(a.model.max_position_embeddings == b.model.max_position_embeddings);
  CHECK(a.model.vocab_size == b.model.vocab_size);
  CHECK(a.model.make_vocab_size_divisible_by == b.model.make_vocab_size_divisible_by);
  CHECK(a.model.activation == b.model.activation);
  CHECK(a.model.layernorm_epsilon == b.model.layernorm_epsilon);
  CHECK(a.model.init_method_std == b.model.init_method_std);
  CHECK(a.model.hidden_dropout == b.model.hidden_dropout);
  CHECK(a.model.attention_dropout == b.model.attention_dropout);
  CHECK(a.model.init_from == b.model.init_from);
  CHECK(a.parallel.tensor == b.parallel.tensor);
  CHECK(a.parallel.pipeline == b.parallel.pipeline);
  CHECK(a.parallel.data == b.parallel.data);
  CHECK(a.parallel.micro_batch_size == b.parallel.micro_batch_size);
  CHECK(a.parallel.zero_stage == b.parallel.zero_stage);
  CHECK(a.parallel.activation_checkpointing == b.parallel.activation_checkpointing);
  CHECK(a.parallel.cuda_graph == b.parallel.cuda_graph);
  CHECK(a.precision == b.precision);
  CHECK(a.fp8.hybrid == b.fp8.hybrid);
  CHECK(a.fp8.scaling == b.fp8.scaling);
  CHECK(a.fp8.amax_history_len == b.fp8.amax_history_len);
  CHECK(a.fp8.margin == b.fp8.margin);
  CHECK(a.fp8.amax_algo == b.fp8.amax_algo);
  CHECK(a.optimizer.lr == b.optimizer.lr);
  CHECK(a.optimizer.min_lr == b.optimizer.min_lr);
  CHECK(a.optimizer.beta1 == b.optimizer.beta1);
  CHECK(a.optimizer.beta2 == b.optimizer.beta2);
  CHECK(a.optimizer.eps == b.optimizer.eps);
  CHECK(a.optimizer.weight_decay == b.optimizer.weight_decay);
  CHECK(a.optimizer.clip_grad == b.optimizer.clip_grad);
  CHECK(a.optimizer.loss_scale == b.optimizer.loss_scale);
  CHECK(a.optimizer.initial_loss_scale == b.optimizer.initial_loss_scale);
  CHECK(a.optimizer.loss_scale_window == b.optimizer.loss_scale_window);
  CHECK(a.optimizer.hysteresis == b.optimizer.hysteresis);
  CHECK(a.optimizer.min_loss_scale == b.optimizer.min_loss_scale);
  CHECK(a.parallel.grad_reduce_dtype == b.parallel.grad_reduce_dtype);
  CHECK(a.schedule.warmup_tokens == b.schedule.warmup_tokens);
  CHECK(a.schedule.decay_tokens == b.schedule.decay_tokens);
  CHECK(a.schedule.decay_style == b.schedule.decay_style);
  CHECK(a.schedule.train_tokens == b.schedule.train_tokens);
  CHECK(a.schedule.train_iters == b.schedule.train_iters);
  CHECK(a.batch.global_batch_size == b.batch.global_batch_size);
  CHECK(a.batch.rampup.start == b.batch.rampup.start);
  CHECK(a.batch.rampup.increment == b.batch.rampup.increment);
  CHECK(a.batch.rampup.tokens == b.batch.rampup.tokens);
  REQUIRE(a.data.blend.size() == b.data.blend.size());
  for (size_t k = 0; k < a.data.blend.size(); ++k) {
    CHECK(a.data.blend[k].prefix == b.data.blend[k].prefix);
    CHECK(a.data.blend[k].weight == b.data.blend[k].weight);
  }
  CHECK(a.data.split == b.data.split);
  CHECK(a.data.seed == b.data.seed);
  CHECK(a.data.shuffle == b.data.shuffle);
  CHECK(a.data.cache_dir == b.data.cache_dir);
  CHECK(a.checkpoint.dir == b.checkpoint.dir);
  CHECK(a.checkpoint.save_interval == b.checkpoint.save_interval);
  CHECK(a.checkpoint.keep_last == b.checkpoint.keep_last);
  CHECK(a.checkpoint.async == b.checkpoint.async);
  CHECK(a.checkpoint.resume == b.checkpoint.resume);
  CHECK(a.checkpoint.load == b.checkpoint.load);
  CHECK(a.checkpoint.load_optimizer == b.checkpoint.load_optimizer);
  CHECK(a.checkpoint.load_iteration == b.checkpoint.load_iteration);
  CHECK(a.tokenizer.vocab_file == b.tokenizer.vocab_file);
  CHECK(a.tokenizer.merge_file == b.tokenizer.merge_file);
  CHECK(a.logging.interval == b.logging.interval);
  CHECK(a.logging.metrics_file == b.logging.metrics_file);
  CHECK(a.logging.tensorboard_dir == b.logging.tensorboard_dir);
  CHECK(a.eval.interval == b.eval.interval);
  CHECK(a.eval.iters == b.eval.iters);
  CHECK(a.seed == b.seed);
}

}  // namespace mtnlg::test
