// Private to core/config: the recipe schema as a key tree, and the YAML-level steps that run
// before typed parsing (overrides, unknown-key and shape checks) plus typed scalar reads.
//
// The schema table is the single source of key names and their order: unknown-key messages,
// override path checks and recipe_to_yaml's order all come from it. Everything here is
// stateless and thread-safe; YAML::Node handles are not shared between threads.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/recipe.h"

namespace mtnlg::recipe_detail {

// What a key holds, as far as the tree walk cares (scalar types are checked by the readers).
enum class Kind {
  kScalar,   // int, double, bool, string or enum
  kMap,      // a section with its own keys
  kList,     // a list of scalars (optimizer.betas, data.split)
  kMapList,  // a list of maps (data.blend)
};

struct KeySpec {
  std::string_view name;
  Kind kind;
  std::span<const KeySpec> children;  // keys of a kMap, or of each entry of a kMapList
};

// The top-level keys of a recipe, in schema order.
std::span<const KeySpec> recipe_schema();

// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
std::string join_path(const std::string& path, std::string_view key);

// The closest valid key to a misspelt one, if the typo is obvious; empty otherwise.
std::string suggest_key(std::string_view key, std::span<const KeySpec> valid);

// Throws the unknown-key Error for `key` under `section_path`.
[[noreturn]] void throw_unknown_key(const std::string& section_path, std::string_view key,
                                    std::span<const KeySpec> valid);

// Applies one "a.b.c=value" override to `root` (creating missing maps). Path components
// are checked against the schema; a list entry is addressed by index (data.blend.0.prefix).
void apply_override(YAML::Node& root, const std::string& override_text);

// Rejects unknown keys, duplicate keys and maps/lists where the schema wants the other. An error
// at the top level, where there is no key path to name (a key that is not a plain name), names
// `source` and the line instead.
void check_tree(const YAML::Node& root, const std::string& source);

// True when `node` is absent or YAML null (both mean "use the default").
bool is_unset(const YAML::Node& node);

// The value of `key` in `map` (a map or null), or nullopt when absent or null.
std::optional<YAML::Node> find(const YAML::Node& map, std::string_view key);

// Typed reads of one scalar; `path` is the key path for messages.
int64_t to_int(const YAML::Node& node, const std::string& path);
uint64_t to_uint(const YAML::Node& node, const std::string& path);
double to_double(const YAML::Node& node, const std::string& path);
bool to_bool(const YAML::Node& node, const std::string& path);
std::string to_string(const YAML::Node& node, const std::string& path);

// "a map", "a list", "the string \"x\"" ... for wrong-type messages.
std::string describe(const YAML::Node& node);

// Value checks on a parsed recipe with defaults filled in (recipe_validate.cc): impossible
// values and layout divisibility. Throws Error with the key path as context.
void validate_recipe(const Recipe& recipe);
// Upper bounds on the counts (recipe_validate.cc), checked before anything is derived from them,
// so that the products the planner and the trainer form stay far inside 64 bits.
void validate_bounds(const Recipe& recipe);

}  // namespace mtnlg::recipe_detail
