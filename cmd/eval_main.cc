// mtnlg-eval: loss and perplexity of a checkpoint or a Hugging Face GPT-2 model on a recipe's
// valid/test samples or on a whole .bin/.idx (cmd/eval.h). Prints one JSON line. Exit status as
// mtnlg-train's: 0 success; 2 a bad command line, argument or recipe; 4 a missing or corrupt
// file; 1 anything else.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline.h"
#include "cmd/cli_parse.h"
#include "cmd/data_samples.h"
#include "cmd/device_select.h"
#include "cmd/eval.h"
#include "cmd/generate.h"
#include "cmd/stage_scorer.h"
#include "cmd/task_eval.h"
#include "cmd/tokenizer_choice.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/status.h"
#include "data/dataset_builder.h"
#include "data/gpt_dataset.h"
#include "model/gpt_scorer.h"
#include "parallel/job.h"
#include "parallel/runtime.h"

namespace {

// --tasks: each task's metrics as one JSON line, and the harness's results JSON in --output.
// The paper's Figure 3 on the terminal: a row a task, its main metric, a column a shot count.
void print_table(const std::vector<std::string>& names, const std::vector<int64_t>& shots,
                 const std::vector<std::vector<mtnlg::TaskMetrics>>& m) {
  std::fprintf(stderr, "\n%-18s %-16s", "task", "metric");
  for (const int64_t k : shots)
    std::fprintf(stderr, " %10s",
                 (k == 0   ? std::string("zero-shot")
                  : k == 1 ? std::string("one-shot")
                           : std::to_string(k) + "-shot")
                     .c_str());
  std::fprintf(stderr, "\n");
  for (size_t t = 0; t < names.size(); ++t) {
    const bool rolling = m[t][0].has_rolling;
    std::fprintf(stderr, "%-18s %-16s", names[t].c_str(), rolling ? "word_perplexity" : "acc");
    for (size_t k = 0; k < shots.size(); ++k)
      std::fprintf(stderr, " %10.4f", rolling ? m[t][k].word_perplexity : m[t][k].acc);
    std::fprintf(stderr, "\n");
  }
}

// Where --tasks runs: the device, the weights' precision, the scorer, and the tensor x pipeline
// split of the model over the job's ranks (the rest of the ranks are data-parallel replicas).
struct Placement {
  std::string device = "auto", dtype = "fp32", scorer = "auto";
  int64_t tensor = 0, pipeline = 0;  // 0: the checkpoint's own with several ranks, else 1
  int64_t timeout_s = 300;           // a collective waiting longer than this fails
};

mtnlg::DType dtype_of(const std::string& dtype) {
  return dtype == "bf16" ? mtnlg::DType::kBF16 : mtnlg::DType::kF32;
}

int run_tasks(mtnlg::ModelSource source, const std::vector<std::string>& overrides,
              const std::vector<std::string>& names, mtnlg::TaskOptions o,
              const std::vector<int64_t>& shots, const std::string& output,
              const std::string& vocab_file, const std::string& merge_file, int threads,
              const Placement& place, const std::string& log_level, bool* writer) {
  if (o.task_dir.empty())
    throw mtnlg::invalid_argument("--tasks needs --task-dir DIR (DIR/TASK/SPLIT.jsonl)",
                                  "--task-dir");
  mtnlg::check_task_names(names, "--tasks");  // an unknown name fails before the model loads
  // One process, or one rank of a job started by a PMIx launcher (mpirun, srun --mpi=pmix).
  mtnlg::Runtime runtime = mtnlg::Runtime::init();
  *writer = runtime.rank == 0;
  if (!*writer) {
    mtnlg::init_logging_to_stderr(log_level == "off" || log_level == "error" ? log_level : "warn");
    o.progress = mtnlg::ProgressMode::kNone;  // one rank reports
  }
  int64_t tensor = place.tensor, pipeline = place.pipeline;
  if (tensor == 0 && pipeline == 0 && runtime.world > 1 && !source.checkpoint.empty()) {
    // As Megatron-LM evaluates: the checkpoint's own split, the other ranks replicas.
    const mtnlg::CheckpointManifest m =
        mtnlg::read_manifest(mtnlg::require_checkpoint(source.checkpoint));
    if (runtime.world % (m.tensor * m.pipeline) == 0) {
      tensor = m.tensor;
      pipeline = m.pipeline;
    }
  }
  tensor = std::max<int64_t>(tensor, 1);
  pipeline = std::max<int64_t>(pipeline, 1);
  if (runtime.world % (tensor * pipeline) != 0)
    throw mtnlg::invalid_argument(
        "--tensor " + std::to_string(tensor) + " x --pipeline " + std::to_string(pipeline) +
            " ranks a model copy do not divide the job's " + std::to_string(runtime.world) +
            " ranks: launch a multiple of " + std::to_string(tensor * pipeline) +
            " ranks or change --tensor / --pipeline",
        "--tensor");
  const mtnlg::DeviceResolution where =
      mtnlg::resolve_device(mtnlg::device_choice_named(place.device), runtime.local_rank);
  const mtnlg::DType dtype = dtype_of(place.dtype);
  // The packed rows (GPTScorer) need the whole f32 model on the CPU in one process; anything
  // else runs the training forward (StageScorer).
  const bool rows_fit =
      runtime.world == 1 && where.device == mtnlg::Device::kCPU && dtype == mtnlg::DType::kF32;
  if (place.scorer == "rows" && !rows_fit)
    throw mtnlg::invalid_argument(
        "--scorer rows runs the whole float32 model on the CPU in one process; this is " +
            std::to_string(runtime.world) + " ranks on " + where.description + " in " +
            place.dtype + ": drop --scorer (or pass stage)",
        "--scorer");
  const bool stage = place.scorer == "stage" || !rows_fit;
  const int local_world = static_cast<int>(runtime.local_world);
  mtnlg::Job job(std::move(runtime), tensor, pipeline, 0, "--tensor");
  job.connect([&](const mtnlg::Topology& topology, mtnlg::Store& store) {
    return mtnlg::make_device_groups(where, topology, store, std::chrono::seconds(place.timeout_s));
  });
  const mtnlg::Topology& topo = job.topology();
  mtnlg::ProcessGroups& groups = job.groups();
  const mtnlg::TokenizerFiles files = mtnlg::choose_tokenizer(vocab_file, merge_file, source);
  const auto tok = mtnlg::Gpt2Tokenizer::load(files.vocab_file, files.merge_file);
  source.recipe_overrides = overrides;
  // Ranks sharing a node share its cores.
  const int rank_threads =
      threads > 0 ? threads
                  : std::max<int>(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                         std::max(local_world, 1));
  const std::unique_ptr<mtnlg::Backend> backend =
      mtnlg::make_backend(where, rank_threads, mtnlg::attention_backend_of(source));
  mtnlg::StageLayout layout;
  layout.tensor = tensor;
  layout.pipeline = pipeline;
  if (job.multi_rank()) {
    layout.tensor_rank = topo.tensor_rank();
    layout.stage = topo.pipeline_rank();
    if (tensor > 1) layout.tensor_group = groups.tensor.get();
  }
  mtnlg::LoadedModel loaded = mtnlg::load_model(source, *backend, layout, dtype);
  const int64_t budget = o.batch_size * loaded.model->config().max_positions;
  std::unique_ptr<mtnlg::Scorer> scorer;
  if (stage) {
    mtnlg::ScorerGroups sg;
    if (job.multi_rank()) {
      sg.tensor = tensor > 1 ? groups.tensor.get() : nullptr;
      sg.pipeline = pipeline > 1 ? groups.pipeline.get() : nullptr;
      sg.data = topo.sizes().data > 1 ? groups.data.get() : nullptr;
    }
    scorer = std::make_unique<mtnlg::StageScorer>(*loaded.model, sg, budget);
    spdlog::info(
        "scoring with the training forward on {} in {}: tensor {}, pipeline {}, {} "
        "replica(s)",
        where.description, place.dtype, tensor, pipeline, topo.sizes().data);
  } else {
    scorer = std::make_unique<mtnlg::GPTScorer>(*loaded.model, budget);
  }
  if (!*writer) o.samples = nullptr;
  std::string results, nshot, nsamples;
  std::vector<std::vector<mtnlg::TaskMetrics>> table(names.size());
  for (size_t ti = 0; ti < names.size(); ++ti)
    for (const int64_t k : shots) {
      const std::string& t = names[ti];
      o.num_fewshot = k;
      const mtnlg::TaskMetrics m = mtnlg::run_task(t, *scorer, *tok, o);
      table[ti].push_back(m);
      // Several shot counts: the results' keys name them ("piqa (0-shot)").
      const std::string key = shots.size() > 1 ? t + " (" + std::to_string(k) + "-shot)" : t;
      mtnlg::JsonLine line, harness;
      mtnlg::add_task_metrics(line, m);
      harness.add("alias", key);
      if (m.has_rolling) {
        harness.add("word_perplexity,none", m.word_perplexity)
            .add("word_perplexity_stderr,none", "N/A")
            .add("byte_perplexity,none", m.byte_perplexity)
            .add("byte_perplexity_stderr,none", "N/A")
            .add("bits_per_byte,none", m.bits_per_byte)
            .add("bits_per_byte_stderr,none", "N/A");
      } else {
        harness.add("acc,none", m.acc).add("acc_stderr,none", m.acc_stderr);
      }
      if (m.has_acc_norm)
        harness.add("acc_norm,none", m.acc_norm).add("acc_norm_stderr,none", m.acc_norm_stderr);
      if (m.has_perplexity) {
        harness.add("perplexity,none", m.perplexity);
        if (m.has_perplexity_stderr)
          harness.add("perplexity_stderr,none", m.perplexity_stderr);
        else
          harness.add("perplexity_stderr,none", "N/A");
      }
      if (*writer) std::cout << line.str() << std::endl;
      const std::string sep = results.empty() ? "" : ", ";
      results += sep + mtnlg::json_string(key) + ": " + harness.str();
      nshot += sep + mtnlg::json_string(key) + ": " + std::to_string(m.num_fewshot);
      nsamples +=
          sep + mtnlg::json_string(key) + ": " +
          mtnlg::JsonLine().add("original", m.available).add("effective", m.documents).str();
    }
  if (!*writer) return 0;  // one rank reports
  if (!std::cout) throw mtnlg::io_error("could not write to standard output");
  print_table(names, shots, table);
  if (!output.empty())
    mtnlg::write_file_atomic(output, "{\"results\": {" + results + "}, \"n-shot\": {" + nshot +
                                         "}, \"n-samples\": {" + nsamples + "}}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-eval: loss and perplexity (ppl = exp(loss), the mean next-token cross entropy) of "
      "a checkpoint (any layout, gathered on load) or a Hugging Face GPT-2 file, on the valid "
      "or test samples of a recipe as a run reads them, or on every token of a .bin/.idx.\n"
      "Prints one JSON line: split or data, loss, ppl, samples, tokens; on the CPU or a GPU "
      "(--device, --dtype).\n"
      "With --tasks: lm-evaluation-harness's tasks as the harness scores a Hugging Face model "
      "(lambada_openai, lambada_standard, piqa, boolq, wic, anli_r2, hellaswag, winogrande, "
      "hans, race, wikitext; "
      "docs/evaluation.md), one JSON line a task, "
      "and --output the harness's results JSON; on the CPU or a GPU (--device, --dtype), in one "
      "process or as one job under mpirun or srun --mpi=pmix, each model copy split as the "
      "checkpoint is (--tensor, --pipeline), the other ranks replicas sharing the requests.\n"
      "Examples: mtnlg-eval --checkpoint runs/demo-cpu/checkpoints --split test\n"
      "          mtnlg-eval --hf-model gpt2/model.safetensors --data data/demo/kjv_text_document "
      "--seq-length 1024\n"
      "          mtnlg-eval --checkpoint runs/x/checkpoints --tasks lambada_openai --task-dir "
      "tasks --num-fewshot 0\n"
      "          mpirun -np 4 mtnlg-eval --checkpoint runs/x/checkpoints --tasks piqa "
      "--task-dir tasks\n"
      "Exit status: 0 done; 2 bad command line, argument or recipe; 4 missing or corrupt file; "
      "1 other."};
  app.set_version_flag("--version", "mtnlg-eval 0.1.0");
  mtnlg::ModelSource source;
  std::string config, split = "valid", data, log_level = "warn";
  std::vector<std::string> overrides;
  int64_t micro_batch = 0, max_samples = 0;
  int threads = 0;
  app.add_option("--checkpoint", source.checkpoint,
                 "A checkpoint root (its latest) or an iter_NNNNNNN directory");
  app.add_option("--hf-model", source.hf_model, "A Hugging Face GPT-2 model.safetensors");
  app.add_option("--hf-config", source.hf_config,
                 "The model's config.json (default: config.json beside --hf-model)");
  app.add_option("-c,--config", config,
                 "Recipe whose data to evaluate on (default: the checkpoint's own recipe)");
  app.add_option("--set", overrides, "Override a recipe key: --set key.path=value (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--split", split, "valid or test: the recipe's split")
      ->check(CLI::IsMember({"valid", "test"}))
      ->capture_default_str();
  app.add_option("--data", data,
                 "A .bin/.idx prefix to evaluate on instead of a recipe split (every token)");
  app.add_option("--seq-length", source.seq_length,
                 "Sample length (default: the recipe's model.seq_length; a Hugging Face model's "
                 "n_positions)")
      ->check(mtnlg::positive_number());
  app.add_option("--micro-batch", micro_batch,
                 "Samples per forward pass (default: the recipe's micro_batch_size, else 4)")
      ->check(mtnlg::positive_number());
  app.add_option("--max-samples", max_samples,
                 "Evaluate the first N samples (default: a recipe split's eval.iters x "
                 "global_batch_size; all of --data)")
      ->check(mtnlg::positive_number());
  std::vector<std::string> task_names;
  mtnlg::TaskOptions task_options;
  std::string output, vocab_file, merge_file;
  app.add_option(
         "--tasks", task_names,
         "Comma-separated lm-evaluation-harness tasks to score instead of a loss: "
         "lambada_openai, lambada_standard, piqa, boolq, wic, anli_r2, hellaswag, winogrande, "
         "hans, race (high), wikitext")
      ->delimiter(',');
  app.add_option("--task-dir", task_options.task_dir,
                 "With --tasks: where TASK/SPLIT.jsonl are (the harness's datasets exported, one "
                 "document a line)");
  std::vector<int64_t> shots = {0};
  app.add_option("--num-fewshot", shots,
                 "With --tasks: few-shot examples a prompt, drawn as the harness draws them; "
                 "comma-separated for several runs (0,1,5: the paper's zero-, one- and few-shot "
                 "columns in the table)")
      ->delimiter(',')
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--limit", task_options.limit,
                 "With --tasks: score the first N documents of each task (0: all)")
      ->check(mtnlg::non_negative_number());
  app.add_option("--batch-size", task_options.batch_size,
                 "With --tasks: requests packed into one forward, up to N model windows' worth "
                 "of tokens (memory grows with N; the scores do not change)")
      ->check(mtnlg::positive_number())
      ->capture_default_str();
  app.add_option("--bootstrap-iters", task_options.bootstrap_iters,
                 "With --tasks: resamples for perplexity's standard error, as the harness's "
                 "--bootstrap_iters (0: none, \"N/A\" in the results)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--fewshot-seed", task_options.fewshot_seed,
                 "With --tasks: the few-shot sampler's seed (the harness's default)")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  std::string log_samples;
  app.add_option("--log-samples", log_samples,
                 "With --tasks: write one JSON line a request here (task, doc_id, request, "
                 "context, continuation, loglikelihood, greedy), as the harness's --log_samples");
  app.add_option("--output", output,
                 "With --tasks: write the harness's results JSON here (results, n-shot, "
                 "n-samples)");
  app.add_option("--vocab-file", vocab_file,
                 "With --tasks: GPT-2 encoder.json (default: the checkpoint's own tokenizer, or "
                 "vocab.json beside --hf-model, else data/gpt2/encoder.json)");
  app.add_option("--merge-file", merge_file,
                 "With --tasks: GPT-2 vocab.bpe (default: the checkpoint's own merges.txt, else "
                 "data/gpt2/vocab.bpe)");
  Placement place;
  app.add_option("--device", place.device,
                 "auto, cpu or cuda, where the model runs (auto: a GPU when this build has CUDA "
                 "and one is visible; with --tasks under a launcher, rank r takes GPU local_rank "
                 "% visible; cuda without one is exit 3)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--dtype", place.dtype,
                 "fp32 or bf16, the weights and activations of the forward (bf16: rounded from "
                 "the fp32 weights)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--scorer", place.scorer,
                 "With --tasks: auto, rows or stage. rows: the whole fp32 model on the CPU in one "
                 "process, requests packed row by row (the fastest there); stage: the training "
                 "forward, on any device, precision and layout; auto: rows where it can run")
      ->check(CLI::IsMember({"auto", "rows", "stage"}))
      ->capture_default_str();
  app.add_option("--tensor", place.tensor,
                 "With --tasks under mpirun/srun: tensor-parallel ranks a model copy (default: "
                 "the checkpoint's own layout, the other ranks data-parallel replicas)")
      ->check(mtnlg::positive_number());
  app.add_option("--pipeline", place.pipeline,
                 "With --tasks under mpirun/srun: pipeline stages a model copy (default: the "
                 "checkpoint's own)")
      ->check(mtnlg::positive_number());
  app.add_option("--threads", threads,
                 "CPU threads (default: all cores, shared among a node's ranks)")
      ->check(mtnlg::non_negative_number());
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  bool no_progress_bar = false;
  app.add_flag("--no-progress-bar", no_progress_bar,
               "Progress as plain log lines (each tenth of the way, shown at --log-level info) "
               "even when stderr is a terminal, where a bar of the samples or request groups "
               "scored, their rate and the time left is drawn otherwise");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  task_options.progress =
      no_progress_bar ? mtnlg::ProgressMode::kLines : mtnlg::ProgressMode::kAuto;

  return mtnlg::exit_status_of([&] {
    mtnlg::init_logging_to_stderr(log_level);  // stdout holds the results
    if (!task_names.empty()) {
      std::ostringstream samples;
      if (!log_samples.empty()) task_options.samples = &samples;
      bool writer = true;
      const int status = run_tasks(source, overrides, task_names, task_options, shots, output,
                                   vocab_file, merge_file, threads, place, log_level, &writer);
      if (writer && !log_samples.empty()) mtnlg::write_file_atomic(log_samples, samples.str());
      return status;
    }
    for (const char* flag :
         {"--task-dir", "--num-fewshot", "--limit", "--batch-size", "--bootstrap-iters", "--output",
          "--log-samples", "--scorer", "--tensor", "--pipeline"})
      if (app.get_option(flag)->count() > 0)
        throw mtnlg::invalid_argument(std::string(flag) + " goes with --tasks", flag);
    if (!config.empty() && !data.empty())
      throw mtnlg::invalid_argument("--data evaluates a file; drop --config (or --data)", "--data");
    std::optional<mtnlg::Recipe> recipe;
    if (!config.empty()) {
      recipe = mtnlg::load_recipe(config, overrides);
      if (source.seq_length == 0) source.seq_length = recipe->model.seq_length;
    } else
      source.recipe_overrides = overrides;  // --set applies to the checkpoint's own recipe
    const mtnlg::DeviceResolution where =
        mtnlg::resolve_device(mtnlg::device_choice_named(place.device), 0);
    const std::unique_ptr<mtnlg::Backend> backend =
        mtnlg::make_backend(where, threads, mtnlg::attention_backend_of(source));
    mtnlg::LoadedModel loaded = mtnlg::load_model(source, *backend, {}, dtype_of(place.dtype));
    if (!recipe && data.empty()) {
      if (!loaded.recipe)
        throw mtnlg::invalid_argument(
            "a Hugging Face model has no recipe: pass --config RECIPE (its data) or --data "
            "PREFIX",
            "--config");
      recipe = loaded.recipe;
    }
    mtnlg::GPTStage& model = *loaded.model;
    const int64_t seq = model.config().seq;
    if (micro_batch == 0) micro_batch = recipe ? recipe->parallel.micro_batch_size : 4;

    std::unique_ptr<mtnlg::SampleSource> samples;
    int64_t count = max_samples;
    mtnlg::JsonLine line;
    if (!data.empty()) {
      auto ids = mtnlg::IndexedDataset::open(data);
      if (ids->num_tokens() < seq + 1)
        throw mtnlg::invalid_argument(data + " holds " + std::to_string(ids->num_tokens()) +
                                          " tokens, fewer than one sample of --seq-length " +
                                          std::to_string(seq) + " + 1",
                                      "--seq-length");
      auto seq_ds = std::make_unique<mtnlg::SequentialGPTDataset>(
          ids, seq, mtnlg::DocumentRange{0, ids->num_sequences()});
      const int64_t all = (seq_ds->tokens_per_epoch() - 1) / seq;
      count = count > 0 ? std::min(count, all) : all;
      samples = std::move(seq_ds);
      line.add("data", data);
    } else {
      const mtnlg::Split which = split == "test" ? mtnlg::Split::kTest : mtnlg::Split::kValid;
      if (recipe->eval.iters <= 0 && max_samples == 0)
        throw mtnlg::invalid_argument(
            "eval.iters is 0: set it (--set eval.iters=N) or pass "
            "--max-samples",
            "eval.iters");
      // Sized as the run sizes the split (its order depends on the size), so the first
      // eval.iters global batches are what the run's first evaluation read.
      const int64_t one_evaluation = recipe->eval.iters * recipe->batch.global_batch_size;
      const int64_t size = which == mtnlg::Split::kTest || recipe->eval.interval > 0
                               ? std::max(mtnlg::split_num_samples(*recipe, which), max_samples)
                               : std::max(one_evaluation, max_samples);
      samples = mtnlg::build_train_dataset(recipe->data, seq, size, which);
      if (!samples)
        throw mtnlg::invalid_argument(std::string("the ") + split +
                                          " split has no documents in any data.blend entry; "
                                          "raise its share of data.split",
                                      "data.split");
      if (count == 0) count = which == mtnlg::Split::kTest ? size : one_evaluation;
      count = std::min(count, samples->size());
      line.add("split", split);
    }
    const auto start = std::chrono::steady_clock::now();
    const mtnlg::EvalResult r =
        mtnlg::evaluate(model, *samples, count, micro_batch, task_options.progress);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The time on stderr only: the JSON line stays the same run after run (scripts compare it).
    spdlog::info("scored {} tokens in {:.3f} s: {:.0f} tokens/s", r.tokens, seconds,
                 static_cast<double>(r.tokens) / seconds);
    line.add("loss", r.loss).add("ppl", r.ppl).add("samples", r.samples).add("tokens", r.tokens);
    std::cout << line.str() << std::endl;
    if (!std::cout) throw mtnlg::io_error("could not write to standard output");
    return 0;
  });
}
