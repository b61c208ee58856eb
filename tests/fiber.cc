#include "fiber.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <xmmintrin.h>

// mtnlg_fiber_switch(save, load): pushes the registers the System V ABI has a callee keep (rbx,
// rbp, r12-r15, MXCSR's and the x87 control word), stores the stack pointer in *save, loads
// `load` and pops the same frame from it. mtnlg_fiber_entry is where a started fiber's first
// switch "returns" to: its frame (Fiber::start) holds fn in r13 and arg in r12.
extern "C" void mtnlg_fiber_switch(void** save, void* load);
extern "C" void mtnlg_fiber_entry();

asm(R"(
    .text
    .globl mtnlg_fiber_switch
    .type mtnlg_fiber_switch, @function
    .p2align 4
mtnlg_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size mtnlg_fiber_switch, .-mtnlg_fiber_switch

    .globl mtnlg_fiber_entry
    .type mtnlg_fiber_entry, @function
    .p2align 4
mtnlg_fiber_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size mtnlg_fiber_entry, .-mtnlg_fiber_entry
)");

namespace mtnlg::test {

void Fiber::start(char* stack, size_t bytes, void (*fn)(void*), void* arg) {
  // The frame mtnlg_fiber_switch pops, from the lowest address: MXCSR and the x87 control word
  // (this thread's), r15, r14, r13 = fn, r12 = arg, rbx, rbp, the return address. The top 16-byte
  // aligned, so that mtnlg_fiber_entry calls fn with the stack aligned as the ABI requires.
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 8 * sizeof(uint64_t));
  const uint32_t mxcsr = _mm_getcsr();
  uint16_t x87 = 0;
  asm volatile("fnstcw %0" : "=m"(x87));
  const uint32_t x87_word = x87;
  std::memcpy(&frame[0], &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(&frame[0]) + 4, &x87_word, 4);
  frame[1] = 0;                                // r15
  frame[2] = 0;                                // r14
  frame[3] = reinterpret_cast<uint64_t>(fn);   // r13
  frame[4] = reinterpret_cast<uint64_t>(arg);  // r12
  frame[5] = 0;                                // rbx
  frame[6] = 0;                                // rbp
  frame[7] = reinterpret_cast<uint64_t>(&mtnlg_fiber_entry);
  sp_ = frame;
}

void Fiber::switch_to(Fiber& from, Fiber& to) {
  mtnlg_fiber_switch(&from.sp_, to.sp_);
}

}  // namespace mtnlg::test

#else
#error \
    "tests/fiber.cc switches stacks in x86-64 assembly (the build targets x86-64: CMakeLists.txt)"
#endif
