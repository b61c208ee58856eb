// A fiber for the tests' CUDA emulator (tests/core/simt_emulator.h): a stack of its own and the
// place it stopped, switched to and from in user space. ucontext's swapcontext also saves and
// restores the signal mask, a system call at every switch: that call and the floating-point
// environment swapcontext saves were 70% of an emulated attention kernel's time (perf,
// 2026-11-29), and the emulator switches at every shuffle, product and barrier of every thread.
// The switch is a few x86-64 instructions of our own (tests/fiber.cc).
#pragma once

#include <cstddef>

namespace mtnlg::test {

class Fiber {
 public:
  // Makes this fiber start fn(arg) on the top of stack[0, bytes) when it is next switched to.
  // fn must neither return nor throw: it ends by switching away for good.
  void start(char* stack, size_t bytes, void (*fn)(void*), void* arg);
  // Saves the running context in `from` (which need not have been started: the scheduler's
  // fiber is whatever called) and resumes `to` where it stopped.
  static void switch_to(Fiber& from, Fiber& to);

 private:
  void* sp_ = nullptr;  // the saved stack pointer; the saved registers lie above it (fiber.cc)
};

}  // namespace mtnlg::test
