// mtnlg-recipe: recipes from other tools' configurations and back. Subcommand `from-megatron`
// turns the arguments of a Megatron-LM or Megatron-DeepSpeed pretrain_gpt.py run into a recipe
// YAML (cmd/megatron_args.h), naming every flag it cannot carry over; `to-megatron` prints a
// recipe as such arguments. Exit status as mtnlg-train's: 0 success; 2 a bad command line or a
// recipe that does not validate; 3 what the other side cannot carry over (without
// --allow-dropped); 4 an unwritable output; 1 anything else.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "cmd/megatron_args.h"
#include "core/config/recipe.h"
#include "core/logging.h"
#include "core/status.h"

namespace {

std::string comment_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "#   " + l + "\n";
  return s;
}

// The recipe's paths as the command line wrote them: the recipe resolves every path against the
// working directory (as Megatron-LM does), so one under it is written relative again unless the
// command line gave it (or the directory it lies in) as an absolute path.
std::string paths_as_written(const std::string& yaml, const std::vector<std::string>& args) {
  std::vector<std::string> absolute;  // absolute paths the command line gave, normalized
  for (const std::string& a : args)
    if (!a.empty() && a[0] == '/')
      absolute.push_back(std::filesystem::path(a).lexically_normal().string());
  const std::string cwd = std::filesystem::current_path().string() + "/";
  const std::regex quoted_path(R"re(^(\s*(?:- )?(?:\{prefix: )?[a-z_]+: )"(/[^"]*)"(.*)$)re");
  std::istringstream in(yaml);
  std::string out, line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, quoted_path) && m[2].str().rfind(cwd, 0) == 0) {
      const std::string path = m[2].str();
      bool given_absolute = false;
      for (const std::string& a : absolute)
        given_absolute |= path == a || path.rfind(a + (a.back() == '/' ? "" : "/"), 0) == 0;
      if (!given_absolute) line = m[1].str() + "\"" + path.substr(cwd.size()) + "\"" + m[3].str();
    }
    out += line + "\n";
  }
  return out;
}

// The recipe text: where it came from, what it leaves out, then every key.
std::string converted_recipe(const std::vector<std::string>& args,
                             const std::vector<std::string>& extra_sets, bool allow_dropped) {
  const mtnlg::MegatronConversion c = mtnlg::convert_megatron_args(args);
  std::vector<std::string> sets = c.overrides;
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  mtnlg::Recipe recipe;
  try {
    recipe = mtnlg::parse_recipe("{}", sets, "the Megatron command line");
  } catch (const mtnlg::Error& e) {
    const std::string flag = mtnlg::megatron_flag_for(e.context());
    throw mtnlg::Error(e.code(),
                       e.message() + (flag.empty() ? ""
                                                   : " (Megatron's " + flag +
                                                         "; add or fix it"
                                                         " on the command line, or --set " +
                                                         e.context() + "=...)"),
                       e.context());
  }
  if (!c.not_carried.empty() && !allow_dropped) {
    // A recipe that trains another model, data or schedule than the command line asked for is
    // not written unless the user says so.
    std::string list;
    for (const auto& l : c.not_carried) {
      list += list.empty() ? " " : "; ";
      list += l;
    }
    throw mtnlg::unsupported(
        "the recipe would not do what these flags do:" + list +
            ". The fix: drop them from the command line, or pass --allow-dropped to write the "
            "recipe without them (each stays listed in its header)",
        "--allow-dropped");
  }
  // Each flag left out, on the terminal too: the YAML's comments are easy to miss.
  for (const auto& l : c.not_carried) spdlog::warn("not carried over: {}", l);
  std::string command;
  for (const auto& a : args) command += (command.empty() ? "" : " ") + a;
  std::ostringstream out;
  out << "# Converted by mtnlg-recipe from-megatron from the pretrain_gpt.py arguments:\n#   "
      << command << "\n";
  if (!extra_sets.empty()) {
    out << "# with --set:\n" << comment_lines(extra_sets);
  }
  out << "# Not carried over (this recipe does not do these):\n"
      << (c.not_carried.empty() ? "#   (nothing)\n" : comment_lines(c.not_carried));
  if (!c.notes.empty()) out << "# Notes:\n" << comment_lines(c.notes);
  out << paths_as_written(mtnlg::recipe_to_yaml(recipe), args);
  return out.str();
}

// The recipe as pretrain_gpt.py's arguments, a flag with its values a line (shell continuations),
// paths under the working directory relative to it as the recipe was written; what Megatron
// cannot express stops it (exit 3) unless allow_dropped, and goes to the log with the notes.
std::string megatron_command(const std::string& config, const std::vector<std::string>& sets,
                             bool allow_dropped) {
  const mtnlg::Recipe recipe = mtnlg::load_recipe(config, sets);
  const mtnlg::MegatronCommand c = mtnlg::recipe_to_megatron_args(recipe);
  for (const std::string& n : c.notes) spdlog::info("note: {}", n);
  if (!c.not_expressible.empty()) {
    std::string list;
    for (const std::string& l : c.not_expressible) list += (list.empty() ? " " : "; ") + l;
    if (!allow_dropped)
      throw mtnlg::unsupported("Megatron-LM cannot run this recipe as it is:" + list +
                                   ". The fix: change those keys (--set), or --allow-dropped to "
                                   "print the command line anyway",
                               "--allow-dropped");
    for (const std::string& l : c.not_expressible) spdlog::warn("not expressible: {}", l);
  }
  return mtnlg::megatron_args_text(c, std::filesystem::current_path().string());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-recipe: recipes from other tools' configurations, and back.\n"
      "Example: mtnlg-recipe from-megatron --output my.yaml -- --num-layers 24 --hidden-size "
      "2048 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 4 "
      "--global-batch-size 512 --lr 2e-4 --train-samples 146484375 --data-path 0.3 a 0.7 b "
      "--split 949,50,1 --bf16\n"
      "Example: mtnlg-recipe to-megatron configs/1.3b.yaml\n"
      "Exit status: 0 done; 2 bad command line (a flag no Megatron defines, a bad value), or the "
      "result does not validate; 3 what the other side cannot carry over (without "
      "--allow-dropped); 4 unwritable output; 1 other."};
  app.set_version_flag("--version", "mtnlg-recipe 0.1.0");
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  std::string output;
  std::vector<std::string> megatron_args, sets;
  auto* from = app.add_subcommand(
      "from-megatron",
      "Turn the arguments of a Megatron-LM or Megatron-DeepSpeed pretrain_gpt.py run (given "
      "after --) into a recipe: model shape, parallel layout (tensor, pipeline, virtual "
      "pipeline, distributed optimizer as ZeRO-1, recomputation), batch and ramp, LR schedule "
      "(samples and iterations become tokens), optimizer, precision and loss scaling, data "
      "blend and split, checkpoints, logging and evaluation. A flag no Megatron version "
      "defines is an error (as in Megatron's argparse); a flag the recipe cannot carry over stops "
      "it (exit 3) unless --allow-dropped, and is listed in the recipe's header; flags that only "
      "log or profile are noted. It sets Megatron's defaults where ours differ (linear decay, "
      "split "
      "969,30,1, eval every 1000 iterations over 100, log every 100). The result is validated "
      "as mtnlg-train would; paths resolve against the current directory.");
  from->add_option("-o,--output", output, "Write the recipe here (default: standard output)");
  from->add_option("--set", sets,
                   "Then override a recipe key, as mtnlg-train's --set (e.g. a data path the "
                   "command line lacks)")
      ->allow_extra_args(false);
  bool allow_dropped = false;
  from->add_flag("--allow-dropped", allow_dropped,
                 "Write the recipe even where the command line has flags it cannot carry over "
                 "(architecture flags, other tokenizers, ...: exit 3 without this)");
  from->add_option("ARGS", megatron_args,
                   "pretrain_gpt.py's arguments, after -- (e.g. -- --num-layers 24 ...)")
      ->required();
  std::string config;
  std::vector<std::string> to_sets;
  bool to_allow_dropped = false;
  auto* to = app.add_subcommand(
      "to-megatron",
      "The other way: print the arguments of a Megatron-LM pretrain_gpt.py run that trains "
      "CONFIG's model on its data with its schedule (a flag with its values a line, shell "
      "continuations): the model shape, the parallel layout, precision and loss scaling, the "
      "optimizer, the schedule in iterations where every count is whole iterations of the full "
      "batch (no ramp), else in samples (tokens / seq_length), the data blend, split and seed, "
      "the tokenizer, checkpoints, logging and evaluation. from-megatron of the output gives the "
      "recipe back. What Megatron cannot run as the recipe says (a vocabulary other than GPT-2's, "
      "a Hugging Face init_from, unshuffled data, a data seed apart from the seed) stops it "
      "(exit 3) unless --allow-dropped; this run's own settings Megatron has no flag for "
      "(transports, kept checkpoints, where metrics go) and roundings are logged as notes.");
  to->add_option("CONFIG", config, "The recipe (YAML)")->required()->check(CLI::ExistingFile);
  to->add_option("--set", to_sets, "Override a recipe key first, as mtnlg-train's --set");
  to->add_flag("--allow-dropped", to_allow_dropped,
               "Print the command line even where Megatron would run something the recipe "
               "does not say (exit 3 without this)");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  if (*to)
    return mtnlg::exit_status_of([&] {
      mtnlg::init_logging_to_stderr(log_level);  // stdout holds the command line
      std::cout << megatron_command(config, to_sets, to_allow_dropped);
      if (!std::cout.flush()) throw mtnlg::io_error("cannot write to standard output");
      return 0;
    });
  return mtnlg::exit_status_of([&] {
    mtnlg::init_logging_to_stderr(log_level);  // stdout may hold the recipe
    const std::string text = converted_recipe(megatron_args, sets, allow_dropped);
    if (output.empty()) {
      std::cout << text;
      if (!std::cout.flush()) throw mtnlg::io_error("cannot write the recipe to standard output");
      return 0;
    }
    // Written whole under a temporary name, then renamed: never a half-written recipe.
    const std::string tmp = output + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << text;
      f.flush();
      if (!f) {
        std::remove(tmp.c_str());
        throw mtnlg::io_error("cannot write (missing directory, or disk full?)", output);
      }
    }
    if (std::rename(tmp.c_str(), output.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw mtnlg::io_error("cannot rename the recipe into place", output);
    }
    spdlog::info("wrote {}", output);
    return 0;
  });
}
