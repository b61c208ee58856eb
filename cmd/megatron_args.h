// Recipes from Megatron command lines: the arguments of a Megatron-LM or Megatron-DeepSpeed
// `pretrain_gpt.py` run turned into recipe keys (what `mtnlg-recipe from-megatron` writes).
//
// Every flag either becomes recipe keys or is listed in not_carried with the reason, so a user
// sees what the recipe does not reproduce. Where our defaults differ from Megatron's, the
// conversion sets Megatron's (linear LR decay, split 969,30,1, eval every 1000 iterations over
// 100, log every 100, gradient reduction after backward, and the tanh GeLU of Megatron's
// default bias-GeLU fusion), so the recipe trains as the command line would. Counts in samples or
// iterations become tokens (samples x seq_length; iterations x global batch x seq_length), and
// --lr-warmup-fraction the fraction of the decay's tokens. --save D --load D continues from D's
// latest checkpoint if it holds one, else starts fresh, as Megatron does (checkpoint.resume:
// true); a --load other than --save also becomes checkpoint.load.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/config/recipe.h"

namespace mtnlg {

struct MegatronConversion {
  std::vector<std::string> overrides;  // recipe keys as --set takes them: "a.b=value"
  // "--flag [values]: why", in command-line order: what the recipe cannot reproduce (the model,
  // data or schedule would differ); mtnlg-recipe stops on them unless --allow-dropped.
  std::vector<std::string> not_carried;
  std::vector<std::string> notes;  // conversions worth a second look (approximations)
};

// Throws invalid_argument naming the flag for a flag no Megatron-LM or Megatron-DeepSpeed parser
// has defined (with the likeliest one meant), and for a value that cannot be read (a count that is
// not a number, --data-path with an odd weight/prefix list). Flags that only log, profile or
// supervise Megatron's run go to notes; every other flag without a recipe key to not_carried.
MegatronConversion convert_megatron_args(const std::vector<std::string>& args);

// The Megatron flag that sets a recipe key ("model.num_layers" -> "--num-layers"), or "" when
// none does: for messages about a recipe key the command line left out.
std::string megatron_flag_for(const std::string& recipe_key);

// The other way (what `mtnlg-recipe to-megatron` prints): a recipe as the arguments of a
// Megatron-LM pretrain_gpt.py run that trains the same model on the same data with the same
// schedule, in Megatron-LM's flags (the schedule in iterations where the run counts whole
// iterations without a ramp, else in samples: Megatron refuses a ramp with iterations), so that
// convert_megatron_args of them gives the recipe back. Each entry is a flag and its values.
struct MegatronCommand {
  std::vector<std::vector<std::string>> flags;
  // "key value: why", for what Megatron would run differently (the model, data or schedule):
  // mtnlg-recipe stops on them unless --allow-dropped.
  std::vector<std::string> not_expressible;
  // This run's own settings Megatron has no flag for and that change no number (where metrics
  // go, the CPU transports, kept checkpoints), and counts rounded to whole samples.
  std::vector<std::string> notes;
};
MegatronCommand recipe_to_megatron_args(const Recipe& recipe);

// The flags as a shell reads them: a flag with its values a line, continued with a backslash,
// each word single-quoted where it needs it; paths under `relative_to` (a directory; "" for
// none) written relative to it.
std::string megatron_args_text(const MegatronCommand& command, const std::string& relative_to);

// A recipe's schedule in Megatron's units, samples of seq_length tokens (rounded to the nearest
// whole sample), as Megatron's OptimizerParamScheduler counts it: the warmup, the decay and the
// run (wd_incr_steps: schedule.train_tokens, or the samples of schedule.train_iters' iterations
// with the batch ramp, whichever ends the run). to-megatron's flags and the scheduler state
// mtnlg-ckpt export --format megatron writes both come from here, so they agree.
struct MegatronSchedule {
  int64_t warmup_samples = 0, decay_samples = 0, train_samples = 0;
};
MegatronSchedule megatron_schedule(const Recipe& recipe);

}  // namespace mtnlg
