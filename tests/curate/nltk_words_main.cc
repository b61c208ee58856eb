// mtnlg-curate-test-nltk PUNKT_DIR TEXTS: NLTK's tokenizers as data/curate/nltk_tokenize.h
// implements them, for tests/curate/nltk_test.sh to compare with NLTK itself. TEXTS holds texts
// separated by NUL bytes; for each, three lines on stdout: NLTKWordTokenizer's tokens, Punkt's
// sentence spans (begin-end in code points) and word_tokenize's tokens, space-separated (no
// token holds a space: both split at whitespace).
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "data/curate/nltk_tokenize.h"
#include "data/python_text.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: mtnlg-curate-test-nltk PUNKT_DIR TEXTS\n";
    return 2;
  }
  try {
    const mtnlg::curate::PunktModel model = mtnlg::curate::read_punkt_model(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto join = [](const std::vector<std::u32string>& words) {
      std::string line;
      for (size_t i = 0; i < words.size(); ++i) {
        if (i) line += ' ';
        line += mtnlg::u32_to_utf8(words[i]);
      }
      return line;
    };
    size_t at = 0;
    while (at <= all.size()) {
      const size_t end = std::min(all.find('\0', at), all.size());
      const std::u32string text = mtnlg::utf8_to_u32(all.substr(at, end - at));
      std::cout << join(mtnlg::curate::nltk_treebank_words(text)) << '\n';
      std::string spans;
      for (const auto& [a, b] : mtnlg::curate::punkt_sentence_spans(text, model)) {
        if (!spans.empty()) spans += ' ';
        spans += std::to_string(a) + "-" + std::to_string(b);
      }
      std::cout << spans << '\n' << join(mtnlg::curate::nltk_word_tokenize(text, model)) << '\n';
      at = end + 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "mtnlg-curate-test-nltk: " << e.what() << '\n';
    return 4;
  }
  return 0;
}
