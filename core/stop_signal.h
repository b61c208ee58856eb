// Stop signals: SIGTERM (Slurm at the time limit, scancel), SIGUSR1 (sbatch --signal=USR1@T) and
// SIGINT (Ctrl-C) set a flag instead of killing the process; the trainer reads it at the next
// iteration boundary, agrees with the other ranks, saves a checkpoint and exits 75.
//
// The flag is the one process-wide state here besides the logger: a signal handler can reach
// nothing else. A second SIGINT kills at once (the default action is restored after the first),
// so an impatient Ctrl-C still works.
#pragma once

namespace mtnlg {

// Installs the handlers (idempotent).
void install_stop_signal_handlers();
// The first stop signal received since start (or the last clear), 0 if none.
int stop_signal_received();
// Forgets a received signal (tests).
void clear_stop_signal();
// "SIGTERM", "SIGUSR1", "SIGINT", or "signal N".
const char* stop_signal_name(int signo);

// Exit status of a run stopped to be continued: saved, "try again" (sysexits.h EX_TEMPFAIL).
inline constexpr int kExitTryAgain = 75;

}  // namespace mtnlg
