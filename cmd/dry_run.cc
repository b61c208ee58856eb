#include "cmd/dry_run.h"

#include <cstdio>
#include <string>

#include "cmd/trainer.h"
#include "model/gpt_params.h"
#include "optim/lr_schedule.h"

namespace mtnlg {

namespace {

std::string human(double v) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%s", v, units[u]);
  return buf;
}

}  // namespace

void print_dry_run(const Recipe& r, std::ostream& out) {
  const GPTConfig c = gpt_config_from(r);
  const int64_t params = gpt_parameter_count(c);
  const int64_t dp = r.parallel.data > 0 ? r.parallel.data : 1;
  const int64_t world = r.parallel.tensor * r.parallel.pipeline * dp;
  const int64_t iters = planned_iterations(r);
  const int64_t tokens = iters * r.tokens_per_iteration();

  out << "recipe is valid\n\n";
  out << "model\n";
  out << "  parameters            " << params << " (" << human(static_cast<double>(params)) << ")\n";
  out << "  layers                " << c.num_layers << ", hidden " << c.hidden << ", heads "
      << c.heads << " (head dim " << c.head_dim() << "), ffn " << c.ffn << "\n";
  out << "  sequence              " << c.seq << " (max positions " << c.max_positions << ")\n";
  out << "  vocabulary            " << c.vocab << " padded to " << c.padded_vocab << "\n";
  out << "  precision             " << precision_name(r.precision)
      << (r.parallel.activation_checkpointing ? ", activation checkpointing" : "") << "\n\n";
  out << "layout\n";
  out << "  tensor x pipeline x data  " << r.parallel.tensor << " x " << r.parallel.pipeline
      << " x " << dp << (r.parallel.data > 0 ? "" : " (data derived from the world size; 1 assumed)")
      << " = " << world << " ranks\n";
  out << "  layers per stage      " << c.num_layers / r.parallel.pipeline << "\n";
  out << "  micro-batch           " << r.parallel.micro_batch_size << ", micro-batches per rank "
      << r.batch.global_batch_size / (r.parallel.micro_batch_size * dp) << "\n";
  out << "  ZeRO stage            " << r.parallel.zero_stage << "\n\n";
  out << "schedule\n";
  out << "  global batch          " << r.batch.global_batch_size << " samples = "
      << r.tokens_per_iteration() << " tokens";
  if (r.batch.rampup.start > 0)
    out << " (ramp " << r.batch.rampup.start << " -> " << r.batch.global_batch_size << " by "
        << r.batch.rampup.increment << " over " << human(static_cast<double>(r.batch.rampup.tokens))
        << " tokens; counted at the full batch here)";
  out << "\n";
  out << "  iterations            " << iters << " (" << human(static_cast<double>(tokens))
      << " tokens)\n";
  out << "  lr                    " << r.optimizer.lr << " peak, warmup "
      << human(static_cast<double>(r.schedule.warmup_tokens)) << " tokens, "
      << decay_style_name(r.schedule.decay_style) << " to " << r.optimizer.min_lr << " at "
      << human(static_cast<double>(r.schedule.decay_tokens)) << " tokens\n";
  const LrSchedule lr(r.optimizer, r.schedule);
  out << "  lr at 25/50/75/100%   ";
  for (int q = 1; q <= 4; ++q) out << (q > 1 ? " / " : "") << lr.lr_at(tokens * q / 4);
  out << "\n";
  try {
    check_supported(r);
  } catch (const Error& e) {
    out << "\nnote: this build cannot train this recipe yet: " << e.what() << "\n";
  }
}

}  // namespace mtnlg
