// tests/fiber.h, the stack switch under the CUDA emulator (simt_emulator.h): fibers resume where
// they stopped, with the registers a callee keeps, their own floating-point rounding mode, a
// stack aligned as the ABI requires and room on it for deep calls.
#include <catch2/catch.hpp>

#include <cfenv>
#include <cstdint>
#include <memory>
#include <vector>

#include <xmmintrin.h>

#include "fiber.h"

using mtnlg::test::Fiber;

namespace {

constexpr size_t kStack = 256 * 1024;

struct PingPong {
  Fiber main, a, b;
  std::vector<int> log;  // 2i: a's round i, 2i + 1: b's
  int rounds = 0;
};

// Each fiber logs, hands over to the other (a to b, b to main), and counts its rounds.
void ping(void* arg) {
  auto* p = static_cast<PingPong*>(arg);
  for (int i = 0;; ++i) {
    p->log.push_back(2 * i);
    Fiber::switch_to(p->a, p->b);
  }
}
void pong(void* arg) {
  auto* p = static_cast<PingPong*>(arg);
  for (int i = 0;; ++i) {
    p->log.push_back(2 * i + 1);
    ++p->rounds;
    Fiber::switch_to(p->b, p->main);
  }
}

// Values a compiler keeps in callee-saved registers across the switch: each fiber computes its
// own from its seed, switches away and back many times, and checks them after.
struct Registers {
  Fiber main, f;
  uint64_t seed = 0;
  bool ok = true;
  int switches = 0;
};
__attribute__((noinline)) uint64_t mix(uint64_t x) {
  return x * 0x9e3779b97f4a7c15ull ^ (x >> 29);
}
void keep_registers(void* arg) {
  auto* r = static_cast<Registers*>(arg);
  const uint64_t s = r->seed;
  const uint64_t v0 = mix(s), v1 = mix(v0), v2 = mix(v1), v3 = mix(v2), v4 = mix(v3), v5 = mix(v4);
  for (;;) {
    Fiber::switch_to(r->f, r->main);
    ++r->switches;
    r->ok = r->ok && v0 == mix(s) && v1 == mix(v0) && v2 == mix(v1) && v3 == mix(v2) &&
            v4 == mix(v3) && v5 == mix(v4);
  }
}

struct Env {
  Fiber main, f;
  // fegetround reads the x87 control word; SSE arithmetic rounds by MXCSR's bits: both kept.
  int mode_at_start = -1, mode_after = -1;
  unsigned sse_after = 0;
  uintptr_t aligned_probe = 1;
  int depth_reached = 0;
};
__attribute__((noinline)) int recurse(int depth) {
  volatile char pad[1000];  // about 1 KB a level
  pad[0] = static_cast<char>(depth);
  return depth == 0 ? pad[0] : recurse(depth - 1) + 1 + pad[0] - pad[0];
}
void env_fiber(void* arg) {
  auto* e = static_cast<Env*>(arg);
  // A 16-byte aligned local: the compiler relies on the ABI's stack alignment and does not
  // realign, so a misaligned fiber stack shows here.
  alignas(16) volatile char probe[16] = {};
  e->aligned_probe = reinterpret_cast<uintptr_t>(&probe[0]) % 16;
  e->mode_at_start = std::fegetround();
  std::fesetround(FE_TOWARDZERO);
  Fiber::switch_to(e->f, e->main);
  e->mode_after = std::fegetround();
  e->sse_after = _MM_GET_ROUNDING_MODE();
  e->depth_reached = recurse(200);  // about 200 KB of the 256 KB stack
  std::fesetround(FE_TONEAREST);
  Fiber::switch_to(e->f, e->main);
  for (;;) Fiber::switch_to(e->f, e->main);
}

}  // namespace

TEST_CASE("fibers resume where they stopped - in the order they hand over") {
  PingPong p;
  auto sa = std::make_unique<char[]>(kStack), sb = std::make_unique<char[]>(kStack);
  p.a.start(sa.get(), kStack, &ping, &p);
  p.b.start(sb.get(), kStack, &pong, &p);
  for (int i = 0; i < 1000; ++i) Fiber::switch_to(p.main, p.a);
  REQUIRE(p.rounds == 1000);
  REQUIRE(p.log.size() == 2000);
  for (size_t i = 0; i < p.log.size(); ++i) CHECK(p.log[i] == static_cast<int>(i));
}

TEST_CASE("a fiber's and its caller's callee-saved registers survive the switches") {
  std::vector<Registers> rs(8);
  std::vector<std::unique_ptr<char[]>> stacks;
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].seed = 1000 + i;
    stacks.push_back(std::make_unique<char[]>(kStack));
    rs[i].f.start(stacks.back().get(), kStack, &keep_registers, &rs[i]);
  }
  // The caller keeps its own values live across every switch too.
  const uint64_t w0 = mix(7), w1 = mix(w0), w2 = mix(w1), w3 = mix(w2), w4 = mix(w3), w5 = mix(w4);
  bool mine = true;
  for (int round = 0; round < 500; ++round)
    for (Registers& r : rs) {
      Fiber::switch_to(r.main, r.f);
      mine = mine && w0 == mix(7) && w1 == mix(w0) && w2 == mix(w1) && w3 == mix(w2) &&
             w4 == mix(w3) && w5 == mix(w4);
    }
  CHECK(mine);
  for (const Registers& r : rs) {
    CHECK(r.ok);
    CHECK(r.switches == 499);  // the first switch starts it; each later one resumes it
  }
}

TEST_CASE("a fiber has its own rounding mode and an aligned deep stack") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  Env e;
  auto stack = std::make_unique<char[]>(kStack);
  e.f.start(stack.get(), kStack, &env_fiber, &e);
  Fiber::switch_to(e.main, e.f);
  CHECK(e.aligned_probe == 0);
  CHECK(e.mode_at_start == FE_TONEAREST);    // the creator's at start()
  CHECK(std::fegetround() == FE_TONEAREST);  // the fiber's toward-zero stayed with it
  CHECK(_MM_GET_ROUNDING_MODE() == _MM_ROUND_NEAREST);
  Fiber::switch_to(e.main, e.f);
  CHECK(e.mode_after == FE_TOWARDZERO);
  CHECK(e.sse_after == _MM_ROUND_TOWARD_ZERO);
  CHECK(e.depth_reached == 200);
  CHECK(std::fegetround() == FE_TONEAREST);
  CHECK(_MM_GET_ROUNDING_MODE() == _MM_ROUND_NEAREST);
}
