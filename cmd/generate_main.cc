// mtnlg-generate: continue prompts with a trained model (cmd/generate.h). Exit status as
// mtnlg-train's: 0 success; 2 a bad command line or argument; 4 a missing or corrupt file; 1
// anything else.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "cmd/device_select.h"
#include "cmd/generate.h"
#include "cmd/tokenizer_choice.h"
#include "core/logging.h"
#include "core/metrics.h"
#include "core/status.h"
#include "data/gpt2_tokenizer.h"
#include "data/unicode_classes.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& line) {
  std::istringstream in(line);
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v > INT32_MAX)
      throw mtnlg::invalid_argument("\"" + word +
                                        "\" is not a token id (--input-format ids reads "
                                        "space-separated non-negative integers)",
                                    "--input-format");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// The ids joined by `sep`.
std::string join_ids(const std::vector<int32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += sep;
    s += std::to_string(ids[i]);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-generate: continue prompts with a trained GPT, from a checkpoint (any tensor and "
      "pipeline layout, gathered on load) or a Hugging Face GPT-2 safetensors file.\n"
      "A key/value cache makes each new token one single-position forward pass; on the CPU in "
      "float32, or on a GPU or in bf16/fp16 (--device, --dtype: the cache on the device).\n"
      "Prompts: each --prompt, else each non-empty line of standard input.\n"
      "Example: mtnlg-generate --checkpoint runs/demo-cpu/checkpoints --prompt 'In the beginning' "
      "--temperature 0 --max-new-tokens 20\n"
      "Exit status: 0 done; 2 bad command line or argument; 4 missing or corrupt file; 1 other."};
  app.set_version_flag("--version", "mtnlg-generate 0.1.0");
  mtnlg::ModelSource source;
  std::vector<std::string> prompts;
  std::string input_format = "text", output_format = "text", vocab_file, merge_file;
  std::string log_level = "warn";
  mtnlg::SamplingOptions sampling;
  mtnlg::GenerateOptions options;
  bool no_stop = false;
  int threads = 0;
  app.add_option("--checkpoint", source.checkpoint,
                 "A checkpoint root (checkpoint.dir: its latest) or an iter_NNNNNNN directory");
  app.add_option("--hf-model", source.hf_model,
                 "A Hugging Face GPT-2 model.safetensors (GPT2LMHeadModel/GPT2Model names; what "
                 "mtnlg-ckpt export writes)");
  app.add_option("--hf-config", source.hf_config,
                 "The model's config.json (default: config.json beside --hf-model)");
  app.add_option("-p,--prompt", prompts, "A prompt (repeatable); none: read standard input");
  app.add_option("--input-format", input_format,
                 "text (GPT-2 BPE-encoded) or ids (space-separated token ids)")
      ->check(CLI::IsMember({"text", "ids"}))
      ->capture_default_str();
  app.add_option("--output-format", output_format,
                 "text: the continuation, decoded (one per prompt, followed by a newline); ids: "
                 "the new token ids, space-separated, one line per prompt; jsonl: one JSON "
                 "object per prompt with prompt, completion and ids")
      ->check(CLI::IsMember({"text", "ids", "jsonl"}))
      ->capture_default_str();
  app.add_option("--max-new-tokens", options.max_new_tokens,
                 "Tokens to generate per prompt (prompt + new tokens must fit the model's "
                 "max_position_embeddings)")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  app.add_option("--temperature", sampling.temperature,
                 "Softmax temperature; 0: greedy (the most likely token, ties to the lowest id)")
      ->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "Sample among the k most likely tokens; 0: all")
      ->capture_default_str();
  app.add_option("--top-p", sampling.top_p,
                 "Nucleus sampling: among the most likely tokens whose probability reaches p; "
                 "1: all")
      ->capture_default_str();
  app.add_option("--seed", sampling.seed, "Seed of the sampler (same seed, same output)")
      ->capture_default_str()
      ->check(mtnlg::non_negative_number());
  app.add_flag("--no-stop-at-eod", no_stop,
               "Keep going after <|endoftext|> (by default a continuation stops there)");
  app.add_option("--vocab-file", vocab_file,
                 "GPT-2 encoder.json (default: the checkpoint's own tokenizer, or vocab.json "
                 "beside --hf-model, else data/gpt2/encoder.json when run from the repository "
                 "root); needed for text input or text/jsonl output");
  app.add_option("--merge-file", merge_file,
                 "GPT-2 vocab.bpe (default: the checkpoint's own merges.txt, else "
                 "data/gpt2/vocab.bpe, as --vocab-file)");
  std::string device = "auto", dtype = "fp32";
  app.add_option("--device", device,
                 "auto, cpu or cuda: where the model runs (auto: a GPU when this build has CUDA "
                 "and one is visible; cuda without one is exit 3)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--dtype", dtype,
                 "fp32, bf16 or fp16: the weights, activations and cache (bf16/fp16: rounded "
                 "from the fp32 weights)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (default: all cores)")
      ->check(mtnlg::non_negative_number());
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  return mtnlg::exit_status_of([&] {
    mtnlg::init_logging_to_stderr(log_level);  // stdout holds the results
    mtnlg::check_sampling(sampling);
    std::shared_ptr<const mtnlg::Gpt2Tokenizer> tokenizer;
    if (input_format == "text" || output_format != "ids") {
      const mtnlg::TokenizerFiles files = mtnlg::choose_tokenizer(vocab_file, merge_file, source);
      tokenizer = mtnlg::Gpt2Tokenizer::load(files.vocab_file, files.merge_file);
    }
    const mtnlg::DeviceResolution where =
        mtnlg::resolve_device(mtnlg::device_choice_named(device), 0);
    const std::unique_ptr<mtnlg::Backend> backend =
        mtnlg::make_backend(where, threads, mtnlg::attention_backend_of(source));
    const mtnlg::DType weights = dtype == "bf16"   ? mtnlg::DType::kBF16
                                 : dtype == "fp16" ? mtnlg::DType::kF16
                                                   : mtnlg::DType::kF32;
    const std::unique_ptr<mtnlg::GPTStage> model =
        mtnlg::load_model(source, *backend, {}, weights).model;
    spdlog::info("generating on {} in {}", where.description, dtype);
    const int64_t vocab = model->config().vocab;
    // GPT-2's end-of-text is its last id; a model with another vocabulary has none we know.
    options.stop_token = no_stop     ? -1
                         : tokenizer ? (tokenizer->eod() < vocab ? tokenizer->eod() : -1)
                                     : static_cast<int32_t>(vocab == 50257 ? 50256 : -1);
    if (prompts.empty()) {
      std::string line;
      while (std::getline(std::cin, line)) {
        if (!line.empty()) prompts.push_back(line);
      }
      if (prompts.empty())
        throw mtnlg::invalid_argument("no prompt: pass --prompt TEXT or lines on standard input",
                                      "--prompt");
    }
    mtnlg::TokenSampler sampler(sampling);
    for (const std::string& prompt : prompts) {
      const std::vector<int32_t> ids =
          input_format == "ids" ? parse_ids(prompt) : tokenizer->encode(prompt);
      const auto total = static_cast<int64_t>(ids.size()) + options.max_new_tokens;
      if (total > model->config().max_positions)
        throw mtnlg::invalid_argument(
            "the prompt (" + std::to_string(ids.size()) + " tokens) and --max-new-tokens " +
                std::to_string(options.max_new_tokens) + " exceed the model's " +
                std::to_string(model->config().max_positions) +
                " positions; the fix: lower --max-new-tokens or shorten the prompt",
            "--max-new-tokens");
      mtnlg::GPTDecoder decoder(*model, std::max<int64_t>(total, 1));
      const auto start = std::chrono::steady_clock::now();
      const std::vector<int32_t> out = mtnlg::generate(decoder, ids, options, sampler);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // On stderr: the results on stdout stay the same run after run.
      spdlog::info("{} prompt tokens and {} new in {:.3f} s: {:.1f} new tokens/s", ids.size(),
                   out.size(), seconds, static_cast<double>(out.size()) / seconds);
      if (output_format == "ids") {
        std::cout << join_ids(out, " ") << "\n";
      } else {
        const std::string text =
            mtnlg::replace_invalid_utf8(tokenizer->decode(std::span<const int32_t>(out)));
        if (output_format == "text") {
          std::cout << text << "\n";
        } else {
          std::cout << mtnlg::JsonLine()
                           .add("prompt", prompt)
                           .add("completion", text)
                           .add_raw("ids", "[" + join_ids(out, ", ") + "]")
                           .str()
                    << "\n";
        }
      }
      std::cout.flush();
      if (!std::cout) throw mtnlg::io_error("could not write to standard output");
    }
    return 0;
  });
}
