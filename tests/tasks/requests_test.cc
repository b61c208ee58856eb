// Log-likelihood requests (data/tasks/requests.h) against lm-evaluation-harness's code written
// again in Python (_encode_pair, loglikelihood's empty context, HFLM's window) over GPT-2's BPE
// in Python (scripts/prepare_demo_data.py), on contexts with trailing spaces, newlines and
// Unicode whitespace, merges across the boundary, empty contexts and truncation.
#include "data/tasks/requests.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/status.h"
#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  s += ']';
  return s;
}

// A Python string literal of UTF-8 text: every byte of the text as a \x escape of a bytes
// literal, decoded (nothing in the text can end the literal).
std::string py_literal(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string q = "b'";
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    q += "\\x";
    q += hex[b >> 4];
    q += hex[b & 15];
  }
  q += "'.decode()";
  return q;
}

TEST_CASE("requests are the harness's: the context's trailing spaces move, the whole is split") {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"The capital of France is", " Paris"},
      {"The capital of France is ", "Paris"},  // the space moves to the continuation
      {"Question: 2+2=?\nAnswer:", " 4"},
      {"Tabs and newlines\t\n", "next"},
      {"A no-break space\u00a0", "after"},  // str.isspace: U+00A0 is whitespace
      {"Ends in ideographic space\u3000", "x"},
      {"Caf\u00e9", "s"},    // "Cafés" encodes differently from "Café" + "s"
      {"don", "'t stop"},    // a merge across the boundary
      {"", " hello world"},  // empty: <|endoftext|> as the context
      {"Hello", ""},
  };
  const auto tok = Gpt2Tokenizer::load(test::source_path("data/gpt2/encoder.json"),
                                       test::source_path("data/gpt2/vocab.bpe"));
  std::string program = "import json, sys\nsys.path.insert(0, '";
  program += test::source_path("scripts");
  program += "')\nfrom prepare_demo_data import GPT2Tokenizer\ntok = GPT2Tokenizer('";
  program += test::source_path("data/gpt2");
  program +=
      "')\n"
      "def encode_pair(context, continuation):\n"
      "    n_spaces = len(context) - len(context.rstrip())\n"
      "    if n_spaces > 0:\n"
      "        continuation = context[-n_spaces:] + continuation\n"
      "        context = context[:-n_spaces]\n"
      "    whole = tok.encode(context + continuation)\n"
      "    ctx = tok.encode(context)\n"
      "    return ctx, whole[len(ctx):]\n"
      "def request(context, continuation, prefix=50256):\n"
      "    if context == '':\n"
      "        cont = tok.encode(continuation)\n"
      "        return ([prefix], cont) if prefix != cont[0] else (cont[:1], cont[1:])\n"
      "    return encode_pair(context, continuation)\n"
      "pairs = [\n";
  for (const auto& [c, k] : pairs) {
    program += "  (";
    program += py_literal(c);
    program += ", ";
    program += py_literal(k);
    program += "),\n";
  }
  program +=
      "]\nfor c, k in pairs:\n"
      "    a, b = request(c, k)\n"
      "    print(json.dumps(a).replace(' ', ''), json.dumps(b).replace(' ', ''))\n";
  const auto lines = [&] {
    std::vector<std::string> l;
    std::istringstream in(python(program));
    for (std::string s; std::getline(in, s);) l.push_back(s);
    return l;
  }();
  REQUIRE(lines.size() == pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    INFO("context '" << pairs[i].first << "' continuation '" << pairs[i].second << "'");
    const TokenPair p = encode_request(*tok, pairs[i].first, pairs[i].second, tok->eod());
    CHECK(ids_text(p.context) + " " + ids_text(p.continuation) == lines[i]);
  }
  // The moved space: " Paris" is one token either way.
  const TokenPair a = encode_request(*tok, "The capital of France is ", "Paris", tok->eod());
  const TokenPair b = encode_request(*tok, "The capital of France is", " Paris", tok->eod());
  CHECK(a.context == b.context);
  CHECK(a.continuation == b.continuation);
  CHECK_THROWS_AS(encode_request(*tok, "", "", tok->eod()), Error);
}

TEST_CASE("the model's window: truncated from the left, the last token dropped") {
  TokenPair p;
  p.context = {1, 2, 3, 4};
  p.continuation = {5, 6, 7};
  ModelInput in = causal_input(p, 100);
  CHECK(in.tokens == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK(in.first_scored == 3);  // logits at 3, 4, 5 score tokens 5, 6, 7
  in = causal_input(p, 4);      // (ctx + cont)[-5:][:-1]
  CHECK(in.tokens == std::vector<int32_t>{3, 4, 5, 6});
  CHECK(in.first_scored == 1);
  CHECK_THROWS_AS(causal_input(p, 2), Error);  // the continuation alone does not fit
}

}  // namespace
}  // namespace mtnlg::tasks
