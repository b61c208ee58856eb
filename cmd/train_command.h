// mtnlg-train's command as a function: parse the command line, set up the job (runtime,
// topology, groups), train; returns the exit status. mtnlg-train's main calls it with no hooks;
// a test binary (tests/cmd/train_hooks_main.cc) passes the Trainer's test seams, so that no
// test hook lives in the production binary.
#pragma once

#include "cmd/trainer.h"

namespace mtnlg {

int run_train_command(int argc, char** argv, const TrainerHooks& hooks = {});

}  // namespace mtnlg
