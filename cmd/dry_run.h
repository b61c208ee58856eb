// --dry-run: validate a recipe and print what it would train (parameters, layout, schedule)
// without allocating the model. The full planner (memory, FLOPs, the paper's TFLOP/s) grows here.
#pragma once

#include <ostream>

#include "core/config/recipe.h"

namespace mtnlg {

void print_dry_run(const Recipe& recipe, std::ostream& out);

}  // namespace mtnlg
