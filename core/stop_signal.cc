#include "core/stop_signal.h"

#include <csignal>
#include <initializer_list>

namespace mtnlg {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signo) {
  if (g_stop_signal == 0) g_stop_signal = signo;
  if (signo == SIGINT) std::signal(SIGINT, SIG_DFL);
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking I/O and waits go on; the flag is read at the boundary
  for (const int s : {SIGTERM, SIGUSR1, SIGINT}) sigaction(s, &sa, nullptr);
}

int stop_signal_received() {
  return g_stop_signal;
}

void clear_stop_signal() {
  g_stop_signal = 0;
}

const char* stop_signal_name(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace mtnlg
