#include "data/curate/pipeline.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <glob.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/clean_stage.h"
#include "data/curate/decontaminate_stage.h"
#include "data/curate/dedup_stage.h"
#include "data/curate/extract_stage.h"
#include "data/curate/line_reader.h"
#include "data/curate/quality_stage.h"
#include "data/curate/staged_file.h"
#include "data/preprocess.h"

namespace fs = std::filesystem;

namespace mtnlg::curate {

namespace {

struct Dataset {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> steps;
  double weight = 0;
  std::vector<std::string> shards;                      // the current shards, step by step
  std::vector<std::pair<std::string, int64_t>> counts;  // documents after each step
  int64_t tokens = 0;
};

std::string cfg_error_where(const std::string& config, const std::string& key) {
  return config + ": " + key;
}

void check_keys(const YAML::Node& n, const std::string& config, const std::string& where,
                const std::set<std::string>& allowed) {
  if (!n.IsMap())
    throw invalid_argument((where.empty() ? std::string("the file") : where) + " must be a mapping",
                           cfg_error_where(config, where));
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!allowed.count(k)) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      const std::string key = where.empty() ? k : where + "." + k;
      throw invalid_argument("unknown key '" + key + "'; the fix: one of " + list,
                             cfg_error_where(config, key));
    }
  }
}

template <typename T>
T value(const YAML::Node& n, const std::string& key, const T& fallback, const std::string& config,
        const std::string& where) {
  if (!n || !n[key]) return fallback;
  try {
    return n[key].as<T>();
  } catch (const YAML::Exception&) {
    const std::string k = where.empty() ? key : where + "." + key;
    throw invalid_argument("'" + k + "' has the wrong type", cfg_error_where(config, k));
  }
}

std::vector<std::string> expand(const std::string& pattern, const std::string& base,
                                const std::string& config, const std::string& key) {
  const std::string p =
      fs::path(pattern).is_absolute() ? pattern : (fs::path(base) / pattern).string();
  glob_t g{};
  const int rc = ::glob(p.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  if (out.empty())
    throw not_found("'" + pattern +
                        "' matches no file (relative paths are from the config's "
                        "folder)",
                    cfg_error_where(config, key));
  std::sort(out.begin(), out.end());
  return out;
}

// A step's settings and inputs (each with its size and its bytes' XXH3, not its time: a rerun
// that rewrites an input with the same bytes changes no stamp): the step is skipped when its
// folder holds the same stamp and every output.
std::string stamp_of(const std::string& settings, const std::vector<std::string>& inputs) {
  std::ostringstream s;
  s << settings << "\n";
  std::vector<char> buf(size_t{1} << 20);
  for (const std::string& in : inputs) {
    std::ifstream f(in, std::ios::binary);
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    int64_t size = 0;
    while (f) {
      f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      XXH3_64bits_update(st, buf.data(), static_cast<size_t>(f.gcount()));
      size += f.gcount();
    }
    s << in << " " << size << " " << std::hex << XXH3_64bits_digest(st) << std::dec << "\n";
    XXH3_freeState(st);
  }
  return s.str();
}

bool done(const std::string& dir, const std::string& stamp,
          const std::vector<std::string>& outputs) {
  std::ifstream in(dir + "/.stamp");
  const std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (old != stamp) return false;
  return std::all_of(outputs.begin(), outputs.end(),
                     [](const std::string& f) { return fs::exists(f); });
}

void write_stamp(const std::string& dir, const std::string& stamp) {
  write_whole_file(dir + "/.stamp", stamp);
}

int64_t count_records(const std::vector<std::string>& shards) {
  int64_t n = 0;
  std::string line;
  for (const std::string& s : shards) {
    LineReader r(s);
    while (r.next(&line)) n += line.find_first_not_of(" \t\r") != std::string::npos;
  }
  return n;
}

std::string stem(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  for (const char* ext : {".gz", ".zst", ".jsonl", ".warc", ".html", ".htm", ".json"})
    if (name.size() > std::strlen(ext) &&
        name.compare(name.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
      name.resize(name.size() - std::strlen(ext));
  return name;
}

}  // namespace

std::string run_pipeline(const PipelineOptions& o) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(o.config);
  } catch (const YAML::BadFile&) {
    throw not_found("cannot read the corpus config", o.config);
  } catch (const YAML::Exception& e) {
    throw invalid_argument(std::string("not YAML: ") + e.what(), o.config);
  }
  const std::string& C = o.config;
  check_keys(root, C, "",
             {"output_dir", "text_key", "training_tokens", "datasets", "clean", "quality", "dedup",
              "decontaminate", "tokenizer"});
  const std::string base =
      fs::path(C).parent_path().string().empty() ? "." : fs::path(C).parent_path().string();
  const auto rel = [&](const std::string& p) {
    return fs::path(p).is_absolute() ? p : (fs::path(base) / p).string();
  };
  const std::string out_dir = value<std::string>(root, "output_dir", "", C, "");
  if (out_dir.empty())
    throw invalid_argument("'output_dir' is required", cfg_error_where(C, "output_dir"));
  const std::string out = rel(out_dir);
  const std::string text_key = value<std::string>(root, "text_key", "text", C, "");
  const double training_tokens = value<double>(root, "training_tokens", 0.0, C, "");
  if (!root["datasets"] || !root["datasets"].IsSequence() || root["datasets"].size() == 0)
    throw invalid_argument("'datasets' must list at least one dataset",
                           cfg_error_where(C, "datasets"));

  std::vector<Dataset> datasets;
  std::set<std::string> names;
  for (size_t i = 0; i < root["datasets"].size(); ++i) {
    const YAML::Node d = root["datasets"][i];
    const std::string where = "datasets[" + std::to_string(i) + "]";
    check_keys(d, C, where, {"name", "inputs", "steps", "weight"});
    Dataset ds;
    ds.name = value<std::string>(d, "name", "", C, where);
    if (ds.name.empty() || ds.name.find_first_of("/ ") != std::string::npos ||
        !names.insert(ds.name).second)
      throw invalid_argument(where + ".name must be a unique name without '/' or spaces",
                             cfg_error_where(C, where + ".name"));
    for (const auto& p : value<std::vector<std::string>>(d, "inputs", {}, C, where))
      for (auto& f : expand(p, base, C, where + ".inputs")) ds.inputs.push_back(f);
    if (ds.inputs.empty())
      throw invalid_argument(where + ".inputs must name files",
                             cfg_error_where(C, where + ".inputs"));
    ds.steps = value<std::vector<std::string>>(d, "steps", {}, C, where);
    static const std::vector<std::string> order = {"extract", "clean", "quality"};
    size_t last = 0;
    for (const std::string& s : ds.steps) {
      const auto it = std::find(order.begin(), order.end(), s);
      if (it == order.end() || static_cast<size_t>(it - order.begin()) < last)
        throw invalid_argument(
            where + ".steps: '" + s +
                "': the per-dataset steps are extract, "
                "clean, quality, in that order (dedup and decontaminate apply to "
                "every dataset)",
            cfg_error_where(C, where + ".steps"));
      last = static_cast<size_t>(it - order.begin()) + 1;
      if (!root[s] && s != "extract")
        throw invalid_argument(
            where + ".steps names " + s + " but the file has no '" + s + "' section",
            cfg_error_where(C, s));
    }
    ds.weight = value<double>(d, "weight", 1.0, C, where);
    ds.shards = ds.inputs;
    datasets.push_back(std::move(ds));
  }
  const auto find = [&](const std::string& name, const std::string& key) -> Dataset& {
    for (Dataset& d : datasets)
      if (d.name == name) return d;
    throw invalid_argument(key + " names '" + name + "', which is no dataset",
                           cfg_error_where(C, key));
  };
  const std::string json_key_settings = "text_key=" + text_key;
  for (Dataset& d : datasets) d.counts.emplace_back("input", -1);

  // ---- per dataset: extract, clean ----
  for (Dataset& d : datasets) {
    if (std::find(d.steps.begin(), d.steps.end(), "extract") != d.steps.end()) {
      const std::string dir = out + "/extract/" + d.name;
      fs::create_directories(dir);
      std::vector<std::string> outputs;
      for (const std::string& in : d.shards) outputs.push_back(dir + "/" + stem(in) + ".jsonl");
      const std::string stamp = stamp_of("extract", d.shards);
      if (!done(dir, stamp, outputs)) {
        spdlog::info("run: extract {} ({} file(s))", d.name, d.shards.size());
        for (size_t k = 0; k < d.shards.size(); ++k) {
          ExtractOptions e;
          e.inputs = {d.shards[k]};
          e.output = outputs[k];
          e.threads = o.threads;
          e.progress = o.progress;
          run_extract(e);
        }
        write_stamp(dir, stamp);
      }
      d.shards = outputs;
      d.counts.emplace_back("extract", count_records(d.shards));
    }
    if (d.counts.size() == 1) d.counts[0].second = count_records(d.shards);
    if (std::find(d.steps.begin(), d.steps.end(), "clean") != d.steps.end()) {
      const YAML::Node c = root["clean"];
      check_keys(c, C, "clean",
                 {"min_chars", "short_javascript", "min_gpt2_tokens", "languages",
                  "min_language_score", "gopher", "c4", "punkt_dir"});
      CleanOptions cl;
      cl.min_chars = value<int64_t>(c, "min_chars", 0, C, "clean");
      cl.short_javascript = value<int64_t>(c, "short_javascript", 0, C, "clean");
      cl.min_gpt2_tokens = value<int64_t>(c, "min_gpt2_tokens", 0, C, "clean");
      cl.languages = value<std::vector<std::string>>(c, "languages", {}, C, "clean");
      cl.min_language_score = value<double>(c, "min_language_score", 0.0, C, "clean");
      if (value<bool>(c, "gopher", false, C, "clean")) apply_gopher_defaults(&cl.gopher);
      if (value<bool>(c, "c4", false, C, "clean")) apply_c4_defaults(&cl.c4);
      const std::string punkt = value<std::string>(c, "punkt_dir", "", C, "clean");
      if (!punkt.empty()) cl.punkt_dir = rel(punkt);
      const YAML::Node t = root["tokenizer"];
      cl.vocab_file =
          rel(value<std::string>(t, "vocab_file", "data/gpt2/encoder.json", C, "tokenizer"));
      cl.merge_file =
          rel(value<std::string>(t, "merge_file", "data/gpt2/vocab.bpe", C, "tokenizer"));
      cl.text_key = text_key;
      cl.threads = o.threads;
      cl.progress = o.progress;
      const std::string dir = out + "/clean/" + d.name;
      fs::create_directories(dir);
      std::vector<std::string> outputs;
      for (const std::string& in : d.shards) outputs.push_back(dir + "/" + stem(in) + ".jsonl");
      std::ostringstream settings;
      settings << "clean " << json_key_settings << " " << YAML::Dump(c);
      const std::string stamp = stamp_of(settings.str(), d.shards);
      if (!done(dir, stamp, outputs)) {
        spdlog::info("run: clean {}", d.name);
        for (size_t k = 0; k < d.shards.size(); ++k) {
          cl.input = d.shards[k];
          cl.output = outputs[k];
          run_clean(cl);
        }
        write_stamp(dir, stamp);
      }
      d.shards = outputs;
      d.counts.emplace_back("clean", count_records(d.shards));
    }
  }

  // ---- quality: a model (given or trained), then score and filter ----
  bool any_quality = false;
  for (const Dataset& d : datasets)
    any_quality =
        any_quality || std::find(d.steps.begin(), d.steps.end(), "quality") != d.steps.end();
  if (any_quality) {
    const YAML::Node q = root["quality"];
    check_keys(q, C, "quality", {"model", "train", "threshold", "pareto_alpha", "seed"});
    if (!!q["threshold"] == !!q["pareto_alpha"])
      throw invalid_argument("quality needs threshold or pareto_alpha (one of them)",
                             cfg_error_where(C, "quality"));
    std::string model;
    if (q["model"]) {
      model = rel(q["model"].as<std::string>());
    } else if (q["train"]) {
      const YAML::Node t = q["train"];
      check_keys(t, C, "quality.train",
                 {"positive", "negative", "dim", "epoch", "lr", "bucket", "seed"});
      QualityTrainOptions qt;
      for (const auto& n : value<std::vector<std::string>>(t, "positive", {}, C, "quality.train"))
        for (const auto& s : find(n, "quality.train.positive").shards) qt.positive.push_back(s);
      for (const auto& n : value<std::vector<std::string>>(t, "negative", {}, C, "quality.train"))
        for (const auto& s : find(n, "quality.train.negative").shards) qt.negative.push_back(s);
      qt.dim = value<int>(t, "dim", qt.dim, C, "quality.train");
      qt.epoch = value<int>(t, "epoch", qt.epoch, C, "quality.train");
      qt.lr = value<double>(t, "lr", qt.lr, C, "quality.train");
      qt.bucket = value<int>(t, "bucket", qt.bucket, C, "quality.train");
      qt.seed = value<uint32_t>(t, "seed", qt.seed, C, "quality.train");
      qt.common.text_key = text_key;
      const std::string dir = out + "/quality";
      fs::create_directories(dir);
      model = dir + "/model.bin";
      qt.output = model;
      std::vector<std::string> ins = qt.positive;
      ins.insert(ins.end(), qt.negative.begin(), qt.negative.end());
      const std::string stamp = stamp_of("quality.train " + YAML::Dump(t), ins);
      if (!done(dir, stamp, {model})) {
        spdlog::info("run: quality train ({} positive, {} negative shards)", qt.positive.size(),
                     qt.negative.size());
        run_quality_train(qt);
        write_stamp(dir, stamp);
      }
    } else {
      throw invalid_argument("quality needs model or train", cfg_error_where(C, "quality"));
    }
    for (Dataset& d : datasets) {
      if (std::find(d.steps.begin(), d.steps.end(), "quality") == d.steps.end()) continue;
      const std::string dir = out + "/quality/" + d.name;
      fs::create_directories(dir);
      std::vector<std::string> scored, kept;
      for (const std::string& in : d.shards) {
        scored.push_back(dir + "/" + stem(in) + ".scored.jsonl");
        kept.push_back(dir + "/" + stem(in) + ".jsonl");
      }
      std::vector<std::string> ins = d.shards;
      ins.push_back(model);
      const std::string stamp = stamp_of("quality " + YAML::Dump(q), ins);
      std::vector<std::string> outputs = scored;
      outputs.insert(outputs.end(), kept.begin(), kept.end());
      if (!done(dir, stamp, outputs)) {
        spdlog::info("run: quality score and filter {}", d.name);
        for (size_t k = 0; k < d.shards.size(); ++k) {
          QualityScoreOptions s;
          s.model = model;
          s.input = d.shards[k];
          s.output = scored[k];
          s.common.text_key = text_key;
          s.common.threads = o.threads;
          s.common.progress = o.progress;
          run_quality_score(s);
          QualityFilterOptions f;
          f.input = scored[k];
          f.output = kept[k];
          f.use_threshold = !!q["threshold"];
          f.threshold = value<double>(q, "threshold", 0.0, C, "quality");
          f.pareto_alpha = value<double>(q, "pareto_alpha", 0.0, C, "quality");
          f.seed = value<uint32_t>(q, "seed", 1, C, "quality");
          f.common.text_key = text_key;
          run_quality_filter(f);
        }
        write_stamp(dir, stamp);
      }
      d.shards = kept;
      d.counts.emplace_back("quality", count_records(d.shards));
    }
  }

  // ---- dedup across every dataset ----
  if (root["dedup"]) {
    const YAML::Node dd = root["dedup"];
    check_keys(dd, C, "dedup",
               {"priority", "threshold", "num_perm", "seed", "hash", "bands", "rows", "memory_mb"});
    DedupOptions o2;
    o2.priority = value<std::vector<std::string>>(dd, "priority", {}, C, "dedup");
    for (const std::string& p : o2.priority) find(p, "dedup.priority");
    o2.threshold = value<double>(dd, "threshold", o2.threshold, C, "dedup");
    o2.num_perm = value<int>(dd, "num_perm", o2.num_perm, C, "dedup");
    o2.seed = value<uint32_t>(dd, "seed", o2.seed, C, "dedup");
    o2.family = parse_hash_family(value<std::string>(dd, "hash", "xxh3", C, "dedup"), "dedup.hash");
    o2.bands = value<int>(dd, "bands", 0, C, "dedup");
    o2.rows = value<int>(dd, "rows", 0, C, "dedup");
    o2.memory_mb = value<int64_t>(dd, "memory_mb", 0, C, "dedup");
    if (o2.memory_mb < 0)
      throw invalid_argument(C + ": dedup.memory_mb must be 0 (no budget) or more, not " +
                                 std::to_string(o2.memory_mb),
                             "dedup.memory_mb");
    o2.text_key = text_key;
    o2.threads = o.threads;
    o2.progress = o.progress;
    o2.output_dir = out + "/dedup";
    o2.report = out + "/dedup/groups.jsonl";
    std::vector<std::string> ins, outputs;
    for (const Dataset& d : datasets)
      for (const std::string& s : d.shards) {
        o2.inputs.push_back({d.name, s});
        ins.push_back(s);
        outputs.push_back(o2.output_dir + "/" + d.name + "/" + fs::path(s).filename().string());
      }
    fs::create_directories(o2.output_dir);
    const std::string stamp = stamp_of("dedup " + YAML::Dump(dd), ins);
    if (!done(o2.output_dir, stamp, outputs)) {
      spdlog::info("run: dedup across {} dataset(s)", datasets.size());
      run_dedup(o2);
      write_stamp(o2.output_dir, stamp);
    }
    size_t k = 0;
    for (Dataset& d : datasets) {
      for (std::string& s : d.shards) s = outputs[k++];
      d.counts.emplace_back("dedup", count_records(d.shards));
    }
  }

  // ---- decontaminate, then one JSON Lines file and the tokens per dataset ----
  std::vector<std::pair<std::string, std::string>> tasks;
  if (root["decontaminate"]) {
    const YAML::Node dc = root["decontaminate"];
    check_keys(dc, C, "decontaminate", {"task_files", "key_threshold", "splits_count"});
    if (!dc["task_files"] || !dc["task_files"].IsMap())
      throw invalid_argument("decontaminate.task_files must map task names to files",
                             cfg_error_where(C, "decontaminate.task_files"));
    for (const auto& kv : dc["task_files"]) {
      if (!kv.second.IsScalar())
        throw invalid_argument("decontaminate.task_files values must be file paths",
                               cfg_error_where(C, "decontaminate.task_files"));
      tasks.emplace_back(kv.first.as<std::string>(), rel(kv.second.as<std::string>()));
    }
  }
  const YAML::Node tok = root["tokenizer"];
  if (tok) check_keys(tok, C, "tokenizer", {"vocab_file", "merge_file"});
  const std::string vocab =
      rel(value<std::string>(tok, "vocab_file", "data/gpt2/encoder.json", C, "tokenizer"));
  const std::string merges =
      rel(value<std::string>(tok, "merge_file", "data/gpt2/vocab.bpe", C, "tokenizer"));
  fs::create_directories(out + "/final");
  fs::create_directories(out + "/tokens");
  for (Dataset& d : datasets) {
    if (!tasks.empty()) {
      const std::string dir = out + "/decontaminate/" + d.name;
      fs::create_directories(dir);
      std::vector<std::string> outputs;
      for (const std::string& in : d.shards) outputs.push_back(dir + "/" + stem(in) + ".jsonl");
      std::vector<std::string> ins = d.shards;
      for (const auto& t : tasks) ins.push_back(t.second);
      const std::string stamp = stamp_of("decontaminate " + YAML::Dump(root["decontaminate"]), ins);
      if (!done(dir, stamp, outputs)) {
        spdlog::info("run: decontaminate {}", d.name);
        for (size_t k = 0; k < d.shards.size(); ++k) {
          DecontaminateOptions dc;
          dc.input = d.shards[k];
          dc.output = outputs[k];
          dc.task_files = tasks;
          dc.filter.key_threshold =
              value<int64_t>(root["decontaminate"], "key_threshold", 10, C, "decontaminate");
          dc.filter.splits_count =
              value<int64_t>(root["decontaminate"], "splits_count", 10, C, "decontaminate");
          dc.text_key = text_key;
          dc.threads = o.threads;
          dc.progress = o.progress;
          run_decontaminate(dc);
        }
        write_stamp(dir, stamp);
      }
      d.shards = outputs;
      d.counts.emplace_back("decontaminate", count_records(d.shards));
    }
    // One plain JSON Lines file (mtnlg-preprocess's input), then the tokens.
    const std::string final_file = out + "/final/" + d.name + ".jsonl";
    const std::string prefix = out + "/tokens/" + d.name + "_text_document";
    const std::string stamp =
        stamp_of("tokens vocab=" + vocab + " merges=" + merges + " " + json_key_settings, d.shards);
    if (!done(out + "/tokens/" + d.name + ".d", stamp, {prefix + ".bin", prefix + ".idx"})) {
      {
        StagedFile f(final_file);
        std::string line;
        for (const std::string& s : d.shards) {
          LineReader r(s);
          while (r.next(&line)) {
            f.write(line.data(), line.size());
            f.write("\n", 1);
          }
        }
        f.commit();
      }
      PreprocessOptions p;
      p.input = final_file;
      p.json_key = text_key;
      p.output_prefix = prefix;
      p.vocab_file = vocab;
      p.merge_file = merges;
      p.append_eod = true;
      p.workers = std::max(
          1, o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
      p.progress = o.progress;
      spdlog::info("run: tokenize {}", d.name);
      const PreprocessStats st = preprocess(p);
      fs::create_directories(out + "/tokens/" + d.name + ".d");
      write_stamp(out + "/tokens/" + d.name + ".d", stamp);
      d.tokens = st.tokens;
      write_whole_file(out + "/tokens/" + d.name + ".d/tokens", std::to_string(st.tokens));
    } else {
      std::ifstream t(out + "/tokens/" + d.name + ".d/tokens");
      t >> d.tokens;
    }
  }

  // ---- the report and the blend ----
  double weights = 0;
  for (const Dataset& d : datasets) weights += d.weight;
  std::ostringstream md, blend;
  md << "# Corpus report\n\n"
     << "From " << C << " (" << datasets.size() << " datasets).\n\n";
  md << "| dataset | documents: input";
  std::vector<std::string> cols;
  for (const Dataset& d : datasets)
    for (const auto& [step, n] : d.counts)
      if (step != "input" && std::find(cols.begin(), cols.end(), step) == cols.end())
        cols.push_back(step);
  for (const std::string& c : cols) md << ", " << c;
  md << " | tokens | weight | epochs |\n|---|---|---|---|---|\n";
  blend << "# data.blend for a recipe (mtnlg-curate run " << C << ")\ndata:\n  blend:\n";
  std::string json = "[";
  for (const Dataset& d : datasets) {
    const double w = weights > 0 ? d.weight / weights : 0;
    const double epochs = training_tokens > 0 && d.tokens > 0 ? w * training_tokens / d.tokens : 0;
    md << "| " << d.name << " | ";
    std::string counts;
    for (const auto& [step, n] : d.counts)
      counts += (counts.empty() ? "" : " -> ") + (n < 0 ? std::string("-") : std::to_string(n));
    md << counts << " | " << d.tokens << " | " << w << " | ";
    if (training_tokens > 0)
      md << epochs;
    else
      md << "-";
    md << " |\n";
    blend << "    - {prefix: "
          << fs::absolute(out + "/tokens/" + d.name + "_text_document").string()
          << ", weight: " << w << "}\n";
    const std::string steps =
        json_counts(std::map<std::string, int64_t>(d.counts.begin(), d.counts.end()));
    json += (json.size() > 1 ? ", " : "") + JsonLine()
                                                .add("dataset", d.name)
                                                .add_raw("documents", steps)
                                                .add("tokens", d.tokens)
                                                .add("weight", w)
                                                .add("epochs", epochs)
                                                .str();
  }
  json += "]";
  if (training_tokens > 0) md << "\nEpochs at " << training_tokens << " training tokens.\n";
  const auto write = write_whole_file;
  write(out + "/report.md", md.str());
  write(out + "/report.json", JsonLine()
                                      .add("config", C)
                                      .add("training_tokens", training_tokens)
                                      .add_raw("datasets", json)
                                      .str() +
                                  "\n");
  write(out + "/blend.yaml", blend.str());
  return out + "/report.md";
}

}  // namespace mtnlg::curate
