// Python literals as `ast.literal_eval` reads them, the subset a dataset's repr() holds (RACE's
// "problems": a list of dicts of strings and lists of strings): strings in single or double
// quotes with Python's escapes (\\ \' \" \n \t \r \a \b \f \v, octal, \xhh, \uXXXX,
// \UXXXXXXXX; a string prefix is refused), adjacent strings joined, integers, True, False, None,
// lists, tuples and dicts. Throws invalid_argument naming the byte offset for anything else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtnlg::tasks {

struct PyValue {
  enum class Kind { kNone, kBool, kInt, kStr, kList, kDict } kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  std::string str;                                // UTF-8
  std::vector<PyValue> items;                     // list or tuple
  std::vector<std::pair<PyValue, PyValue>> dict;  // in order

  // dict[key] for a string key; throws invalid_argument naming it when absent or not a dict.
  const PyValue& at(const std::string& key) const;
};

PyValue parse_python_literal(std::string_view text);

}  // namespace mtnlg::tasks
