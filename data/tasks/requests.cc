#include "data/tasks/requests.h"

#include <string>

#include "core/status.h"
#include "data/python_text.h"

namespace mtnlg::tasks {

TokenPair encode_pair(const Gpt2Tokenizer& tok, std::string_view context,
                      std::string_view continuation) {
  if (context.empty())
    throw invalid_argument(
        "a request's context is empty (encode_request gives it the prefix token)", "request");
  std::u32string ctx = utf8_to_u32(context);
  size_t keep = ctx.size();
  while (keep > 0 && python_isspace(ctx[keep - 1])) --keep;
  std::string c(context), cont(continuation);
  if (keep < ctx.size()) {
    c = u32_to_utf8(std::u32string_view(ctx).substr(0, keep));
    cont = u32_to_utf8(std::u32string_view(ctx).substr(keep)) + cont;
  }
  const std::vector<int32_t> whole = tok.encode(c + cont);
  TokenPair p;
  p.context = tok.encode(c);
  if (p.context.size() <= whole.size())
    p.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(p.context.size()),
                          whole.end());
  return p;
}

TokenPair encode_request(const Gpt2Tokenizer& tok, std::string_view context,
                         std::string_view continuation, int32_t prefix_token) {
  if (!context.empty()) return encode_pair(tok, context, continuation);
  std::vector<int32_t> cont = tok.encode(continuation);
  if (cont.empty())
    throw invalid_argument("a request with an empty context and a continuation of no tokens",
                           "request");
  TokenPair p;
  if (cont[0] != prefix_token) {
    p.context = {prefix_token};
    p.continuation = std::move(cont);
  } else {
    p.context = {cont[0]};
    p.continuation.assign(cont.begin() + 1, cont.end());
  }
  return p;
}

ModelInput causal_input(const TokenPair& p, int64_t max_length) {
  std::vector<int32_t> all = p.context;
  all.insert(all.end(), p.continuation.begin(), p.continuation.end());
  const auto total = static_cast<int64_t>(all.size());
  const int64_t from = total > max_length + 1 ? total - (max_length + 1) : 0;
  ModelInput in;
  in.tokens.assign(all.begin() + from, all.end() - (total > 0 ? 1 : 0));
  const auto inplen = static_cast<int64_t>(in.tokens.size());
  const auto contlen = static_cast<int64_t>(p.continuation.size());
  if (contlen > inplen)
    throw invalid_argument("a continuation of " + std::to_string(contlen) +
                               " tokens does not fit a model of " + std::to_string(max_length) +
                               " positions",
                           "request");
  in.first_scored = inplen - contlen;
  return in;
}

}  // namespace mtnlg::tasks
