// WikiText as lm-evaluation-harness's `wikitext` task (version 2.0, wikitext-2-raw-v1's
// document-level pages) scores it: the page detokenized (preprocess_wikitext.py's
// wikitext_detokenizer) and scored whole by rolling windows (utils.get_rolling_token_windows with
// context_len 1, then make_disjoint_window: the first window predicts the first max_length tokens
// after the end-of-text token, each next one the following max_length tokens after the one
// before them); word_perplexity, byte_perplexity and bits_per_byte divide the log-likelihood by
// the words (re.split(r"\s+", page): a leading or trailing space counts an empty word) and the
// UTF-8 bytes of the original page, not the detokenized one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tasks/requests.h"

namespace mtnlg::tasks {

std::string wikitext_detokenize(std::string_view page);
int64_t wikitext_words(std::string_view page);

// The disjoint (context, continuation) windows of a token list for a model of max_length
// positions; empty for no tokens.
std::vector<TokenPair> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                       int64_t max_length);

}  // namespace mtnlg::tasks
