// data/sentence_splitter.h: ICU's sentence boundaries with punkt's whitespace handling (and
// Megatron's --keep-newlines), on the cases where ICU and punkt agree and where they do not.
#include "data/sentence_splitter.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace mtnlg {

using Sentences = std::vector<std::string>;

TEST_CASE("sentences end at . ! ? and lose the whitespace after them") {
  SentenceSplitter split(false);
  CHECK(split.split("He left. She stayed! Did it rain? Yes.") ==
        Sentences{"He left.", "She stayed!", "Did it rain?", "Yes."});
  CHECK(split.split("  Leading space. Trailing  \n\n") == Sentences{"Leading space.", "Trailing"});
  // A lowercase word after the period continues the sentence (as punkt's heuristics also do).
  CHECK(split.split("See e.g. this one. Next.") == Sentences{"See e.g. this one.", "Next."});
  CHECK(split.split("").empty());
  CHECK(split.split(" \n\t ").empty());
  // Quotes and brackets after the period stay with the sentence.
  CHECK(split.split("He said \"stop.\" Then he left.") ==
        Sentences{"He said \"stop.\"", "Then he left."});
  // A number's point is not an ending.
  CHECK(split.split("It cost 3.50 dollars. Cheap.") ==
        Sentences{"It cost 3.50 dollars.", "Cheap."});
}

TEST_CASE("with keep_newlines the whitespace after a sentence stays at its end") {
  SentenceSplitter split(true);
  // ICU breaks after each line separator; the blank line's newline joins the sentence before.
  CHECK(split.split("One. Two.\n\nThree.\n") == Sentences{"One. ", "Two.\n\n", "Three.\n"});
  CHECK(split.split("\n\nFirst.") == Sentences{"First."});  // nothing before to keep it
}

TEST_CASE("where ICU and punkt differ: line breaks end sentences, some titles split") {
  SentenceSplitter split(false);
  // ICU ends a sentence at a paragraph break even without a period (punkt would join the lines).
  CHECK(split.split("a heading\nThe body starts here.") ==
        Sentences{"a heading", "The body starts here."});
  // ICU's English exception list keeps "Mr." inside the sentence, as punkt's model does, but not
  // "Dr." (punkt's list has it): there the two split differently.
  CHECK(split.split("Mr. Smith arrived. He sat.") == Sentences{"Mr. Smith arrived.", "He sat."});
  CHECK(split.split("Dr. Smith arrived.") == Sentences{"Dr.", "Smith arrived."});
  // Invalid UTF-8 reads as U+FFFD.
  CHECK(split.split("bad \xff byte.") == Sentences{"bad \xEF\xBF\xBD byte."});
}

}  // namespace mtnlg
