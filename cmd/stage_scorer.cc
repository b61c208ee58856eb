#include "cmd/stage_scorer.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/status.h"
#include "model/vocab_parallel.h"
#include "parallel/pipeline_schedule.h"

namespace mtnlg {
namespace {

// A request as a row: prefix + target but its last token; its scored positions are
// [prefix - 1, length), predicting the target's tokens.
struct Row {
  size_t group = 0, target = 0;
  int64_t length = 0;
};

struct MicroBatch {
  int64_t s = 0;             // positions a row
  std::vector<size_t> rows;  // indices into the rows, longest first
};

// A micro-batch's positions: its longest row rounded up to a multiple of 16, or of an eighth of
// the power of two above it for longer rows (at most 1/8 padding): few distinct shapes, so few
// activation sets and GEMM plans are made, and little padding.
int64_t padded_length(int64_t length, int64_t max_positions) {
  int64_t pow2 = 1;
  while (pow2 < length) pow2 *= 2;
  const int64_t step = std::max<int64_t>(16, pow2 / 8);
  return std::min(max_positions, (length + step - 1) / step * step);
}

void sum_over(Communicator* group, Tensor& t) {
  if (group != nullptr && group->size() > 1) group->all_reduce(t, ReduceOp::kSum);
}

}  // namespace

StageScorer::StageScorer(GPTStage& model, const ScorerGroups& groups, int64_t budget)
    : model_(model), groups_(groups), p2p_(groups.pipeline), budget_(budget) {
  MTNLG_CHECK_MSG(!model_.training(), "StageScorer needs the model in evaluation mode");
  budget_ = std::max(budget_, model_.config().max_positions);
}

std::vector<std::vector<TargetScore>> StageScorer::score(
    std::span<const ScoreGroup> groups, const std::function<void(int64_t)>& progress) {
  const GPTConfig& c = model_.config();
  std::vector<Row> rows;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ScoreGroup& g = groups[i];
    const std::string where = "request group " + std::to_string(i);
    if (g.prefix.empty() || g.targets.empty())
      throw invalid_argument("a group needs a prefix and at least one target", where);
    auto check_tokens = [&](const std::vector<int32_t>& tokens) {
      for (const int32_t t : tokens)
        if (t < 0 || t >= c.vocab)
          throw invalid_argument("token " + std::to_string(t) + " is outside the vocabulary of " +
                                     std::to_string(c.vocab),
                                 where);
    };
    check_tokens(g.prefix);
    for (size_t t = 0; t < g.targets.size(); ++t) {
      const auto& target = g.targets[t];
      if (target.empty()) throw invalid_argument("an empty target", where);
      check_tokens(target);
      const auto length = static_cast<int64_t>(g.prefix.size() + target.size()) - 1;
      if (length > c.max_positions)
        throw invalid_argument("a prefix of " + std::to_string(g.prefix.size()) +
                                   " tokens and a target of " + std::to_string(target.size()) +
                                   " exceed the model's " + std::to_string(c.max_positions) +
                                   " positions (truncate the request to the window first)",
                               where);
      rows.push_back({i, t, length});
    }
  }
  // Longest first (ties in request order): every rank makes the same micro-batches.
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].length > rows[b].length; });
  std::vector<MicroBatch> batches;
  for (size_t k = 0; k < order.size();) {
    const int64_t s = padded_length(rows[order[k]].length, c.max_positions);
    const auto b = static_cast<size_t>(std::max<int64_t>(1, budget_ / s));
    MicroBatch mb{s, {}};
    for (; k < order.size() && mb.rows.size() < b; ++k) mb.rows.push_back(order[k]);
    batches.push_back(std::move(mb));
  }

  const int data_rank = groups_.data != nullptr ? groups_.data->rank() : 0;
  const int data_size = groups_.data != nullptr ? groups_.data->size() : 1;
  const auto n = static_cast<int64_t>(rows.size());
  // Per row: its log-likelihood and 1 when greedy (rows this rank does not score stay 0), then
  // the tokens run; summed over the pipeline (the last stage scores) and the replicas.
  Tensor result = Tensor::cpu({2 * n + 1}, DType::kF64);
  double* res = result.data_as<double>();
  std::fill(res, res + 2 * n + 1, 0.0);
  const bool scores_here = p2p_.is_last_stage();
  const VocabShard shard{c.tp_rank * c.local_vocab(), c.local_vocab(), c.vocab};
  Backend& be = model_.backend();
  const int64_t chunks = model_.num_chunks();
  int64_t rows_done = 0;
  FrozenWeights frozen(be);
  // This replica's micro-batches, those of one shape through the pipeline together.
  std::vector<size_t> mine;
  for (size_t k = static_cast<size_t>(data_rank); k < batches.size();
       k += static_cast<size_t>(data_size))
    mine.push_back(k);
  for (size_t first = 0; first < mine.size();) {
    const MicroBatch& head = batches[mine[first]];
    size_t last = first;
    while (last < mine.size() && batches[mine[last]].s == head.s &&
           batches[mine[last]].rows.size() == head.rows.size())
      ++last;
    const int64_t s = head.s, b = static_cast<int64_t>(head.rows.size());
    model_.set_sequence_length(s);
    std::vector<StageActivations> acts;
    // Without the LM head: it runs below on the scored rows only.
    for (int64_t ch = 0; ch < chunks; ++ch)
      acts.push_back(model_.make_activations(b, ch, /*head=*/false));
    PipelineBuffers buffers =
        make_pipeline_buffers(be, p2p_, model_.activation_shape(b), model_.dtype(), chunks);
    Tensor tokens = Tensor::cpu({b, s}, DType::kI32), targets = Tensor::cpu({b, s}, DType::kI32);
    const ChunkForwardStep step = [&](int64_t chunk, int64_t micro, const Tensor& input) {
      const MicroBatch& mb = batches[mine[first + static_cast<size_t>(micro)]];
      StageActivations& a = acts[static_cast<size_t>(chunk)];
      int32_t* tok = tokens.data_as<int32_t>();
      int32_t* tgt = targets.data_as<int32_t>();
      std::fill(tok, tok + b * s, 0);
      std::fill(tgt, tgt + b * s, 0);
      int64_t scored = 0;
      for (size_t j = 0; j < mb.rows.size(); ++j) {
        const Row& r = rows[mb.rows[j]];
        const ScoreGroup& g = groups[r.group];
        const auto& target = g.targets[r.target];
        int32_t* row = tok + static_cast<int64_t>(j) * s;
        std::copy(g.prefix.begin(), g.prefix.end(), row);
        std::copy(target.begin(), target.end() - 1, row + g.prefix.size());
        int32_t* next = tgt + static_cast<int64_t>(j) * s + g.prefix.size() - 1;
        std::copy(target.begin(), target.end(), next);
        scored += static_cast<int64_t>(target.size());
      }
      const bool first_chunk = model_.stage().pre_process && chunk == 0;
      model_.forward(a, first_chunk ? tokens : input, targets,
                     static_cast<uint64_t>(mine[first + static_cast<size_t>(micro)]));
      if (chunk == chunks - 1 && scores_here) {
        // The target positions' final hidden states, packed, through the tied head (the rows
        // that score nothing skip it), and their scores where the logits are (only 3 doubles a
        // position come to the host).
        const Tensor hidden = a.lnf_out.as_2d();
        Tensor packed = be.alloc({scored, c.hidden}, model_.dtype());
        Tensor host_targets = Tensor::cpu({scored}, DType::kI32);
        int64_t put = 0;
        for (size_t j = 0; j < mb.rows.size(); ++j) {
          const Row& r = rows[mb.rows[j]];
          const auto& target = groups[r.group].targets[r.target];
          const int64_t from =
              static_cast<int64_t>(j) * s + static_cast<int64_t>(groups[r.group].prefix.size()) - 1;
          const auto len = static_cast<int64_t>(target.size());
          Tensor dst = packed.slice(put, put + len);
          be.copy(dst, hidden.slice(from, from + len));
          std::copy(target.begin(), target.end(), host_targets.data_as<int32_t>() + put);
          put += len;
        }
        Tensor device_targets = be.alloc({scored}, DType::kI32);
        be.copy(device_targets, host_targets);
        Tensor logits = be.alloc({scored, c.local_vocab()}, model_.dtype());
        be.gemm_weight(logits, packed,
                       model_.params().get("embedding.word_embeddings.weight").value, true, 1.0,
                       0.0);
        VocabParallelCEContext ce = vocab_parallel_ce_allocate(be, scored);
        std::vector<int64_t> positions(static_cast<size_t>(scored));
        std::iota(positions.begin(), positions.end(), int64_t{0});
        const TokenScores ts = vocab_parallel_token_scores(be, ce, logits, device_targets,
                                                           positions, shard, groups_.tensor);
        int64_t at = 0;
        for (const size_t ri : mb.rows) {
          const size_t len = groups[rows[ri].group].targets[rows[ri].target].size();
          double lp = 0;
          bool greedy = true;
          for (size_t k = 0; k < len; ++k) {
            lp += ts.logprob[static_cast<size_t>(at) + k];
            greedy = greedy && ts.greedy[static_cast<size_t>(at) + k] != 0;
          }
          res[ri] = lp;
          res[n + static_cast<int64_t>(ri)] = greedy ? 1.0 : 0.0;
          at += static_cast<int64_t>(len);
        }
      }
      if (chunk == chunks - 1) {
        rows_done += static_cast<int64_t>(mb.rows.size());
        if (scores_here) res[2 * n] += static_cast<double>(b * s);
        // Groups done, estimated from this replica's share of the rows (for progress lines).
        if (progress)
          progress(std::min<int64_t>(static_cast<int64_t>(groups.size()),
                                     static_cast<int64_t>(groups.size()) * rows_done * data_size /
                                         std::max<int64_t>(n, 1)));
      }
      return a.residual.back();
    };
    forward_pipelining(p2p_, chunks, static_cast<int64_t>(last - first), buffers, step);
    first = last;
  }
  sum_over(groups_.pipeline, result);
  sum_over(groups_.data, result);
  tokens_run_ += static_cast<int64_t>(res[2 * n]);
  std::vector<std::vector<TargetScore>> out(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) out[i].resize(groups[i].targets.size());
  for (int64_t i = 0; i < n; ++i) {
    const Row& r = rows[static_cast<size_t>(i)];
    out[r.group][r.target] = {res[i], res[n + i] > 0.5};
  }
  return out;
}

}  // namespace mtnlg
