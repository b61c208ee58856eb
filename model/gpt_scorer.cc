#include "model/gpt_scorer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/status.h"

namespace mtnlg {

GPTScorer::GPTScorer(GPTStage& model, int64_t max_rows)
    : rows_(model, std::max(max_rows, model.config().max_positions)) {
  if (!rows_.on_host())
    throw invalid_argument(
        "the packed scorer runs an f32 model on the CPU backend; StageScorer (mtnlg-eval "
        "--scorer stage) runs other devices and precisions");
  stats_ = Tensor::cpu({model.config().heads * model.config().max_positions}, DType::kF32);
}

int64_t GPTScorer::rows(const ScoreGroup& g) {
  auto n = static_cast<int64_t>(g.prefix.size());
  for (const auto& t : g.targets) n += static_cast<int64_t>(t.size()) - 1;
  return n;
}

std::vector<std::vector<TargetScore>> GPTScorer::score(
    std::span<const ScoreGroup> groups, const std::function<void(int64_t)>& progress) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const ScoreGroup& g = groups[i];
    const std::string where = "request group " + std::to_string(i);
    if (g.prefix.empty() || g.targets.empty())
      throw invalid_argument("a group needs a prefix and at least one target", where);
    for (const auto& t : g.targets) {
      if (t.empty()) throw invalid_argument("an empty target", where);
      if (static_cast<int64_t>(g.prefix.size() + t.size()) - 1 > max_positions())
        throw invalid_argument("a prefix of " + std::to_string(g.prefix.size()) +
                                   " tokens and a target of " + std::to_string(t.size()) +
                                   " exceed the model's " + std::to_string(max_positions()) +
                                   " positions (truncate the request to the window first)",
                               where);
    }
  }
  // A group larger than a forward goes as its targets one by one, each with the prefix (each
  // fits: prefix + target is at most the model's positions, at most max_rows).
  std::vector<ScoreGroup> split;
  std::vector<std::pair<size_t, size_t>> owner;  // per split group: its group and target
  for (size_t i = 0; i < groups.size(); ++i)
    if (rows(groups[i]) > max_rows())
      for (size_t t = 0; t < groups[i].targets.size(); ++t) {
        split.push_back({groups[i].prefix, {groups[i].targets[t]}});
        owner.emplace_back(i, t);
      }
  std::vector<std::vector<TargetScore>> out, split_out;
  out.reserve(groups.size());
  auto run = [&](std::span<const ScoreGroup> gs, std::vector<std::vector<TargetScore>>* o,
                 bool report) {
    size_t first = 0;
    while (first < gs.size()) {
      size_t last = first;
      int64_t n = 0;
      while (last < gs.size() && rows(gs[last]) <= max_rows() && n + rows(gs[last]) <= max_rows())
        n += rows(gs[last++]);
      if (last == first) {  // too large: scored below from `split`
        o->emplace_back();
        ++first;
        continue;
      }
      forward(gs.subspan(first, last - first), o);
      first = last;
      if (report && progress) progress(static_cast<int64_t>(first));
    }
  };
  run(split, &split_out, false);
  run(groups, &out, true);
  for (size_t k = 0; k < split.size(); ++k) {
    auto& scores = out[owner[k].first];
    scores.resize(groups[owner[k].first].targets.size());
    scores[owner[k].second] = split_out[k][0];
  }
  return out;
}

void GPTScorer::forward(std::span<const ScoreGroup> batch,
                        std::vector<std::vector<TargetScore>>* out) {
  const GPTConfig& c = rows_.config();
  const int64_t h = c.hidden;
  // Pack: each group's prefix, then each target but its last token after it.
  span_begin_.clear();
  span_end_.clear();
  own_begin_.clear();
  int64_t r = 0;
  auto put = [&](int32_t token, int64_t position, int64_t sb, int64_t se, int64_t ob) {
    rows_.embed(r++, token, position, "request");
    span_begin_.push_back(sb);
    span_end_.push_back(se);
    own_begin_.push_back(ob);
  };
  std::vector<int64_t>& starts = starts_;
  starts.clear();
  for (const ScoreGroup& g : batch) {
    const int64_t g0 = r, len = static_cast<int64_t>(g.prefix.size());
    starts.push_back(g0);
    for (int64_t i = 0; i < len; ++i) put(g.prefix[static_cast<size_t>(i)], i, g0, g0, g0);
    for (const auto& t : g.targets) {
      const int64_t t0 = r;
      for (size_t j = 0; j + 1 < t.size(); ++j)
        put(t[j], len + static_cast<int64_t>(j), g0, g0 + len, t0);
    }
  }
  const int64_t n = r;
  for (int64_t l = 0; l < c.num_layers; ++l)
    rows_.layer(l, n, [&](int64_t, const Tensor& qkv, Tensor& o) { attend(batch, qkv, o); });
  tokens_run_ += n;

  // The scored rows of a group are contiguous: its prefix's last row, then its targets' rows.
  // Gathered, the head's GEMMs span groups. Per gathered row: its group and target (-1: the
  // prefix's last row, which predicts every target's first token) and the token's index.
  struct Use {
    size_t group;
    int64_t target, index;
  };
  std::vector<Use> uses;
  gathered_.clear();
  for (size_t gi = 0; gi < batch.size(); ++gi) {
    const ScoreGroup& g = batch[gi];
    const int64_t from = starts[gi] + static_cast<int64_t>(g.prefix.size()) - 1;
    const int64_t to = starts[gi] + rows(g);
    gathered_.insert(gathered_.end(), rows_.x() + from * h, rows_.x() + to * h);
    uses.push_back({gi, -1, 0});
    for (size_t t = 0; t < g.targets.size(); ++t)
      for (size_t j = 1; j < g.targets[t].size(); ++j)
        uses.push_back({gi, static_cast<int64_t>(t), static_cast<int64_t>(j)});
  }
  const size_t base = out->size();
  for (const ScoreGroup& g : batch) {
    out->emplace_back(g.targets.size());
    for (TargetScore& s : out->back()) s.greedy = true;
  }
  const int64_t vocab = c.vocab, stride = rows_.padded_vocab();
  const auto scored = static_cast<int64_t>(uses.size());
  std::vector<double> log_z(static_cast<size_t>(scored));
  std::vector<int64_t> argmax(static_cast<size_t>(scored));
  std::vector<float> logit_rows;  // per used row: the logits its targets read
  rows_.head(gathered_.data(), scored, [&](int64_t first, int64_t m, const float* logits) {
  // Each row's log-normalizer and argmax (in double, over the real vocabulary), row-parallel.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      const float* lg = logits + i * stride;
      float top = lg[0];
      int64_t arg = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (lg[v] > top) {
          top = lg[v];
          arg = v;
        }
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(lg[v]) - top);
      log_z[static_cast<size_t>(first + i)] = top + std::log(sum);
      argmax[static_cast<size_t>(first + i)] = arg;
    }
    for (int64_t i = 0; i < m; ++i) {
      const Use& u = uses[static_cast<size_t>(first + i)];
      const ScoreGroup& g = batch[u.group];
      const float* lg = logits + i * stride;
      const double z = log_z[static_cast<size_t>(first + i)];
      const int64_t arg = argmax[static_cast<size_t>(first + i)];
      auto credit = [&](size_t t, int32_t token) {
        TargetScore& s = (*out)[base + u.group][t];
        s.logprob += static_cast<double>(lg[token]) - z;
        s.greedy = s.greedy && arg == token;
      };
      if (u.target < 0) {
        for (size_t t = 0; t < g.targets.size(); ++t) credit(t, g.targets[t][0]);
      } else {
        const auto t = static_cast<size_t>(u.target);
        credit(t, g.targets[t][static_cast<size_t>(u.index)]);
      }
    }
  });
}

void GPTScorer::attend(std::span<const ScoreGroup> batch, const Tensor& qkv, Tensor& out) {
  const GPTConfig& c = rows_.config();
  const int64_t h = c.hidden, heads = c.heads, hd = c.head_dim();
  // The prefixes: plain causal attention over their own rows.
  for (size_t g = 0; g < batch.size(); ++g) {
    const int64_t g0 = starts_[g], len = static_cast<int64_t>(batch[g].prefix.size());
    const Tensor q = qkv.slice(g0, g0 + len).view({1, len, 3 * h});
    Tensor o = out.slice(g0, g0 + len).view({1, len, h});
    Tensor stats = stats_.slice(0, heads * len).view({1, heads, len});
    rows_.backend().attention_forward(o, stats, q, heads, 0.0, RngStream{});
  }
  // The targets' rows: their prefix, then their own rows so far.
  const float* qp = qkv.data_as<float>();
  float* op = out.data_as<float>();
  std::vector<int64_t> target_rows;
  for (size_t g = 0; g < batch.size(); ++g) {
    const int64_t from = starts_[g] + static_cast<int64_t>(batch[g].prefix.size());
    const int64_t to = starts_[g] + rows(batch[g]);
    for (int64_t i = from; i < to; ++i) target_rows.push_back(i);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto count = static_cast<int64_t>(target_rows.size());
#pragma omp parallel
  {
    std::vector<float> scores;
    std::vector<int64_t> keys;
#pragma omp for schedule(dynamic, 4)
    for (int64_t k = 0; k < count; ++k) {
      const int64_t i = target_rows[static_cast<size_t>(k)];
      const auto u = static_cast<size_t>(i);
      keys.clear();
      for (int64_t t = span_begin_[u]; t < span_end_[u]; ++t) keys.push_back(t);
      for (int64_t t = own_begin_[u]; t <= i; ++t) keys.push_back(t);
      scores.resize(keys.size());
      for (int64_t j = 0; j < heads; ++j) {
        const float* qi = qp + i * 3 * h + j * 3 * hd;
        float top = -INFINITY;
        for (size_t e = 0; e < keys.size(); ++e) {
          const float* kt = qp + keys[e] * 3 * h + j * 3 * hd + hd;
          float dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += qi[d] * kt[d];
          scores[e] = dot * scale;
          top = std::max(top, scores[e]);
        }
        float sum = 0;
        for (float& s : scores) {
          s = std::exp(s - top);
          sum += s;
        }
        float* o = op + i * h + j * hd;
        std::fill(o, o + hd, 0.0f);
        for (size_t e = 0; e < keys.size(); ++e) {
          const float a = scores[e] / sum;
          const float* vt = qp + keys[e] * 3 * h + j * 3 * hd + 2 * hd;
          for (int64_t d = 0; d < hd; ++d) o[d] += a * vt[d];
        }
      }
    }
  }
}

}  // namespace mtnlg
