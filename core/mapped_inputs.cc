#include "core/mapped_inputs.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace mtnlg {

namespace {

constexpr size_t kSlots = 1024;
constexpr size_t kPathBytes = 480;

struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  char path[kPathBytes] = {};
};

struct Table {
  Slot slots[kSlots];
  std::mutex mu;  // writers only; the handler reads without it
  bool installed = false;
};

Table& table() {
  static Table t;  // a signal handler's state (see the header)
  return t;
}

void write_str(const char* s) {
  const ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

extern "C" void on_sigbus(int, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : table().slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b != 0 && b <= addr && addr < s.end.load(std::memory_order_acquire)) {
      write_str("error: corruption [");
      write_str(s.path);
      write_str(
          "]: the file changed size while this run had it mapped (truncated or rewritten "
          "during training?); do not modify inputs of a running job: restore the file and "
          "resume from the last checkpoint\n");
      ::_exit(4);
    }
  }
  // Not one of ours: the default action (a core dump, as before).
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

}  // namespace

void register_mapped_input(const void* begin, size_t bytes, const std::string& path) {
  if (begin == nullptr || bytes == 0) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (!t.installed) {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, nullptr);
    t.installed = true;
  }
  for (Slot& s : t.slots) {
    if (s.begin.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(s.path, path.c_str(), kPathBytes - 1);
    s.path[kPathBytes - 1] = '\0';
    s.end.store(reinterpret_cast<uintptr_t>(begin) + bytes, std::memory_order_release);
    s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    return;
  }
  // More than kSlots mappings: this one is not named on SIGBUS (the default action applies).
}

void unregister_mapped_input(const void* begin) {
  if (begin == nullptr) return;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  for (Slot& s : t.slots)
    if (s.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(begin)) {
      s.begin.store(0, std::memory_order_release);
      return;
    }
}

}  // namespace mtnlg
