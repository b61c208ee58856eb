#include <catch2/catch.hpp>

#include "model/gpt_config.h"
#include "model/gpt_params.h"
#include "model/param_registry.h"
#include "tiny_gpt.h"

using namespace mtnlg;

namespace {
GPTConfig config() {
  return test::tiny_gpt(4);
}

// name -> tied flag of every parameter that is not Tied::kNone.
std::vector<std::pair<std::string, Tied>> tied_of(const GPTConfig& c, const StageSpec& stage) {
  ParamRegistry reg;
  register_gpt_params(reg, c, stage);
  std::vector<std::pair<std::string, Tied>> out;
  for (const auto& p : reg.params())
    if (p.spec.tied != Tied::kNone) out.emplace_back(p.spec.name, p.spec.tied);
  return out;
}
}  // namespace

TEST_CASE("the word embeddings are tied by a flag: owner on the first stage, copy on the last") {
  const GPTConfig c = config();
  using V = std::vector<std::pair<std::string, Tied>>;
  const std::string words = "embedding.word_embeddings.weight";
  // One stage uses the same tensor for the embedding and the head: nothing to tie.
  CHECK(tied_of(c, full_model(c)).empty());
  for (int64_t pp : {2, 4}) {
    INFO("pipeline " << pp);
    CHECK(tied_of(c, pipeline_stage(c, pp, 0)) == V{{words, Tied::kOwner}});
    CHECK(tied_of(c, pipeline_stage(c, pp, pp - 1)) == V{{words, Tied::kCopy}});
    for (int64_t s = 1; s < pp - 1; ++s) CHECK(tied_of(c, pipeline_stage(c, pp, s)).empty());
  }
}
