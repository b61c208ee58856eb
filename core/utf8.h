// UTF-8 as Python decodes it: the one replacement of ill-formed bytes, used by every JSON line
// (core/metrics.h json_string) and by the tokenizer's decode (data/unicode_classes.h).
#pragma once

#include <string>
#include <string_view>

namespace mtnlg {

// `s` with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD), as Python's
// bytes.decode("utf-8", errors="replace") does (Unicode's table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF).
std::string replace_invalid_utf8(std::string_view s);

}  // namespace mtnlg
