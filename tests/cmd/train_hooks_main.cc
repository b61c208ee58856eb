// mtnlg-train-test-hooks: mtnlg-train with the Trainer's test seams set from the environment, for
// the multi-process tests that need them (the production binary has none):
//   MTNLG_INJECT_OVERFLOW=ITERATION[:RANK]  rank RANK (default 0) puts an inf into its gradients
//                                           at that iteration (tests/cmd/overflow_seam.h).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cmd/train_command.h"
#include "overflow_seam.h"

int main(int argc, char** argv) {
  mtnlg::TrainerHooks hooks;
  if (const char* v = std::getenv("MTNLG_INJECT_OVERFLOW"); v != nullptr && *v != 0) {
    // The whole value must parse: "3:x" or "3abc" is an error, not iteration 3 on rank 0.
    long long iteration = 0, rank = 0;
    int used = 0;
    const bool one = std::sscanf(v, "%lld%n", &iteration, &used) == 1 && v[used] == 0;
    const bool two = !one && std::sscanf(v, "%lld:%lld%n", &iteration, &rank, &used) == 2 &&
                     v[used] == 0 && rank >= 0;
    if ((!one && !two) || iteration < 1) {
      std::cerr << "mtnlg-train-test-hooks: MTNLG_INJECT_OVERFLOW=" << v
                << " is not ITERATION[:RANK]\n";
      return 2;
    }
    hooks = mtnlg::test::overflow_at(iteration, rank);
  }
  return mtnlg::run_train_command(argc, argv, hooks);
}
