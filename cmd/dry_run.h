// --dry-run: validate a recipe and print its plan (cmd/planner.h) without allocating the model
// or reading data: parameters in total and per rank, per-rank memory against the device, model
// FLOPs, TFLOP/s per GPU for a measured iteration time, the pipeline bubble, the batch ramp and
// LR schedule, and the length of the run. As text for people, or as one JSON object (--json).
#pragma once

#include <ostream>
#include <string>

#include "cmd/planner.h"
#include "core/config/recipe.h"

namespace mtnlg {

// Both return whether the worst rank fits the GPU's memory (Plan::fits): mtnlg-train --dry-run
// exits with kExitPlanDoesNotFit when it does not, so sweep scripts can filter.
// Throws what make_plan throws (invalid_argument for a layout that does not divide).
bool print_dry_run(const Recipe& recipe, const PlanOptions& options, std::ostream& out);
// One JSON object (and a newline); the keys are listed in docs/planning.md.
bool print_dry_run_json(const Recipe& recipe, const PlanOptions& options, std::ostream& out);

// mtnlg-train --dry-run's exit status for a plan whose worst rank needs more than the GPU has.
inline constexpr int kExitPlanDoesNotFit = 5;

// What --dry-run's flags ask beyond PlanOptions: the GPU planned for (a100, h100, h200; its
// memory and peak unless --gpu-memory-gb or --peak-tflops were given), JSON, whether every
// data.blend prefix is opened and counted (--no-data-check: not), and --threads.
struct DryRunRequest {
  std::string gpu = "a100";
  bool memory_given = false, peak_given = false;
  bool json = false;
  bool check_data = true;
  int threads = 0;
};

// mtnlg-train --dry-run: completes `plan` from the recipe and the request (device, GPU memory
// and peak, the data's documents and tokens), prints it to `out`, and returns the exit status:
// 0, or kExitPlanDoesNotFit (logged). A missing or damaged data.blend prefix is the dataset's
// error, naming data.blend[k] and --no-data-check.
int run_dry_run(const Recipe& recipe, PlanOptions plan, const DryRunRequest& request,
                std::ostream& out);

}  // namespace mtnlg
