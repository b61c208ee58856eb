// Runs a CUDA-style thread program on the CPU, one fiber (tests/fiber.h) per thread of a block, so
// that kernels written per thread with warp collectives (core/kernels/flash2_forward.h) are
// checked in CI without a GPU. Each thread runs until it reaches a collective: a block barrier
// (sync), a warp shuffle (shfl_xor), a warp tensor-core product (mma, its fragments in
// core/kernels/mma_fragment.h's layouts, the product in float from exact bf16/fp16 values) or a
// warp's matrix load from shared memory (ldmatrix, its rows checked aligned and inside it). A
// collective completes once every thread it involves has reached it; a warp whose lanes reach
// different collectives, a barrier that some threads never reach and a program that stops
// making progress are failures. Threads run in lockstep or one warp at a time (Schedule), so a
// program whose threads race on shared memory gives different bits in different schedules. Shared
// memory starts as all-ones bytes (NaN as float, bf16 and fp16), so a read before a write shows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernels/bf16_math.h"
#include "core/kernels/mma_fragment.h"
#include "fiber.h"

namespace mtnlg::test {

class SimtBlock;

// The order the emulator runs threads in. Lockstep: every runnable thread in turn, then every
// warp's collective, round after round (threads in index order or reversed). Warp-serial: one
// warp at a time as far as it goes before the next barrier, warps in index order or reversed.
enum class Schedule { kLockstep, kLockstepReverse, kWarpSerial, kWarpSerialReverse };

// The executor a thread program sees (the W of core/kernels/flash2_forward.h).
class SimtThread {
 public:
  int thread() const { return id_; }
  void sync();
  float shfl_xor(float v, int mask);
  uint32_t shfl_xor(uint32_t v, int mask);
  template <typename T>
  void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    static_assert(std::is_same_v<T, Bf16> || std::is_same_v<T, F16>, "bf16 or fp16 operands");
    mma_any(c, a, b, std::is_same_v<T, Bf16>);
  }
  // cp.async of 16 bytes, global to shared, this thread's alone (not a collective): the copy
  // lands when a cp_async_wait retires its group, so a program that reads the tile before it
  // waits (or before the barrier after the other threads' waits) reads what was there before.
  // Both addresses must be 16-byte aligned and the destination inside shared memory, as the
  // hardware requires (a misaligned one faults there).
  template <typename T>
  void cp_async16(T* dst, const T* src);
  void cp_async_commit() {
    groups_.push_back(pending_);
    pending_.clear();
  }
  template <int N>
  void cp_async_wait() {
    while (groups_.size() > static_cast<size_t>(N)) {
      for (const Copy& c : groups_.front()) std::memcpy(c.dst, c.src, 16);
      groups_.erase(groups_.begin());
    }
  }
  // ldmatrix.sync.aligned.m8n8.x{kCount}[.trans].shared.b16: row is this lane's row address.
  template <bool kTrans, int kCount, typename T>
  void ldmatrix(uint32_t (&r)[kCount], const T* row) {
    static_assert(sizeof(T) == 2 && (kCount == 1 || kCount == 2 || kCount == 4), "m8n8 b16");
    ldm_row_ = row;
    ldm_out_ = r;
    ldm_count_ = kCount;
    ldm_trans_ = kTrans;
    block_on(Op::kLdm);
  }

 private:
  friend class SimtBlock;
  enum class Op { kRun, kSync, kShfl, kMma, kLdm, kDone };
  void mma_any(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16);
  void block_on(Op op);

  SimtBlock* block_ = nullptr;
  int id_ = 0;
  Op op_ = Op::kRun;
  // The collective's operands and result.
  uint32_t shfl_in_ = 0, shfl_out_ = 0;  // the value's bits
  int shfl_mask_ = 0;
  float* c_ = nullptr;
  const uint32_t* a_ = nullptr;
  const uint32_t* b_ = nullptr;
  bool bf16_ = true;
  const void* ldm_row_ = nullptr;
  uint32_t* ldm_out_ = nullptr;
  int ldm_count_ = 0;
  bool ldm_trans_ = false;
  Fiber fiber_;
  struct Copy {
    void* dst;
    const void* src;
  };
  std::vector<Copy> pending_;              // cp.async copies not yet committed
  std::vector<std::vector<Copy>> groups_;  // committed, oldest first
};

class SimtBlock {
 public:
  SimtBlock(int threads, size_t smem_bytes, Schedule schedule)
      : threads_(threads),
        schedule_(schedule),
        smem_bytes_(smem_bytes),
        smem_(smem_bytes + 16, '\xff') {}
  SimtBlock(const SimtBlock&) = delete;
  SimtBlock& operator=(const SimtBlock&) = delete;

  // 16-byte aligned, as CUDA's dynamic shared memory.
  char* smem() {
    const auto p = reinterpret_cast<uintptr_t>(smem_.data());
    return smem_.data() + ((16 - p % 16) % 16);
  }

  // Runs body(thread) for every thread of the block; returns "" or what went wrong. Shared
  // memory keeps what the last run left (reset() starts it as all-ones again).
  std::string run(const std::function<void(SimtThread&)>& body) {
    std::vector<SimtThread> ts(static_cast<size_t>(threads_));
    // The fibers' stacks live as long as the block: a block run many times (a kernel's grid)
    // touches their pages once, and not initialised: a fiber touches the pages it uses.
    if (!stacks_) stacks_ = std::make_unique_for_overwrite<char[]>(threads_ * kStackBytes);
    body_ = &body;
    error_.clear();
    for (int i = 0; i < threads_; ++i) {
      SimtThread& th = ts[static_cast<size_t>(i)];
      th.block_ = this;
      th.id_ = i;
      th.fiber_.start(stacks_.get() + static_cast<size_t>(i) * kStackBytes, kStackBytes,
                      &SimtBlock::entry, &th);
    }
    const bool reverse =
        schedule_ == Schedule::kLockstepReverse || schedule_ == Schedule::kWarpSerialReverse;
    const bool serial =
        schedule_ == Schedule::kWarpSerial || schedule_ == Schedule::kWarpSerialReverse;
    const int warps = (threads_ + 31) / 32;
    // Runs the runnable threads of [t0, t1) until each blocks, in the schedule's order.
    const auto run_threads = [&](int t0, int t1) {
      for (int k = t0; k < t1; ++k) {
        SimtThread& th = ts[static_cast<size_t>(reverse ? t1 - 1 - (k - t0) : k)];
        if (th.op_ == SimtThread::Op::kRun) Fiber::switch_to(sched_, th.fiber_);
      }
    };
    while (error_.empty()) {
      bool progress = false;
      if (serial) {
        // One warp at a time, each as far as it goes before the next barrier: an order the
        // hardware may choose (warps are independent between barriers), and the one that
        // exposes a warp reusing shared memory that a slower warp still reads.
        for (int k = 0; k < warps && error_.empty(); ++k) {
          const int w0 = 32 * (reverse ? warps - 1 - k : k);
          do run_threads(w0, std::min(w0 + 32, threads_));
          while (resolve_warp(ts, w0) && error_.empty());
        }
      } else {
        run_threads(0, threads_);
        for (int w0 = 0; w0 < threads_ && error_.empty(); w0 += 32)
          progress = resolve_warp(ts, w0) || progress;
      }
      if (!error_.empty()) break;
      bool all_done = true, all_sync = true;
      for (const SimtThread& th : ts) {
        all_done = all_done && th.op_ == SimtThread::Op::kDone;
        all_sync = all_sync && th.op_ == SimtThread::Op::kSync;
      }
      if (all_done) break;
      if (progress) continue;
      if (all_sync) {
        for (SimtThread& th : ts) th.op_ = SimtThread::Op::kRun;
        continue;
      }
      error_ = "no progress: some threads wait at a barrier that others never reach";
    }
    body_ = nullptr;
    return error_;
  }

  // mma products completed, over every run.
  int64_t products() const { return products_; }

 private:
  friend class SimtThread;
  static constexpr size_t kStackBytes = 256 * 1024;

  // A thread's fiber: the body, then back to the scheduler for good.
  static void entry(void* arg) {
    auto* th = static_cast<SimtThread*>(arg);
    (*th->block_->body_)(*th);
    th->op_ = SimtThread::Op::kDone;
    Fiber::switch_to(th->fiber_, th->block_->sched_);
  }

  static float value(uint16_t bits, bool bf16) {
    return bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
  }

  // Completes the warp collective the lanes of warp w0 / 32 wait at, if they all do: true when
  // it did. Lanes at different collectives are an error.
  bool resolve_warp(std::vector<SimtThread>& ts, int w0) {
    const int lanes = std::min(32, threads_ - w0);
    SimtThread::Op op = SimtThread::Op::kRun;  // the warp collective some lane is at
    for (int l = 0; l < lanes; ++l) {
      const SimtThread::Op o = ts[static_cast<size_t>(w0 + l)].op_;
      if (o == SimtThread::Op::kShfl || o == SimtThread::Op::kMma || o == SimtThread::Op::kLdm)
        op = o;
    }
    if (op == SimtThread::Op::kRun) return false;
    for (int l = 0; l < lanes; ++l)
      if (ts[static_cast<size_t>(w0 + l)].op_ != op) {
        error_ = "warp " + std::to_string(w0 / 32) + ": lanes at different collectives";
        return false;
      }
    if (lanes != 32) {
      error_ = "a warp collective in a partial warp";
      return false;
    }
    SimtThread* warp = &ts[static_cast<size_t>(w0)];
    if (op == SimtThread::Op::kShfl) resolve_shfl(warp);
    if (op == SimtThread::Op::kMma) resolve_mma(warp);
    if (op == SimtThread::Op::kLdm) resolve_ldm(warp);
    if (!error_.empty()) return false;
    for (int l = 0; l < 32; ++l) warp[l].op_ = SimtThread::Op::kRun;
    return true;
  }

  void resolve_shfl(SimtThread* warp) {
    for (int l = 0; l < 32; ++l) {
      if (warp[l].shfl_mask_ != warp[0].shfl_mask_) {
        error_ = "lanes of one shuffle with different masks";
        return;
      }
      warp[l].shfl_out_ = warp[l ^ warp[l].shfl_mask_].shfl_in_;
    }
  }

  // D = A B + C for the warp's 16 x 8 x 16 product, from the lanes' fragments.
  void resolve_mma(SimtThread* warp) {
    const bool bf16 = warp[0].bf16_;
    float a[16][16], b[16][8], c[16][8];
    for (int l = 0; l < 32; ++l) {
      if (warp[l].bf16_ != bf16) {
        error_ = "lanes of one product in different types";
        return;
      }
      for (int e = 0; e < 8; ++e) {
        const kernels::mma::Coord x = kernels::mma::a_element(l, e);
        const uint32_t r = warp[l].a_[e >> 1];
        a[x.row][x.col] = value(e & 1 ? kernels::mma::high(r) : kernels::mma::low(r), bf16);
      }
      for (int e = 0; e < 4; ++e) {
        const kernels::mma::Coord x = kernels::mma::b_element(l, e);
        const uint32_t r = warp[l].b_[e >> 1];
        b[x.row][x.col] = value(e & 1 ? kernels::mma::high(r) : kernels::mma::low(r), bf16);
        const kernels::mma::Coord y = kernels::mma::c_element(l, e);
        c[y.row][y.col] = warp[l].c_[e];
      }
    }
    for (int l = 0; l < 32; ++l)
      for (int e = 0; e < 4; ++e) {
        const kernels::mma::Coord y = kernels::mma::c_element(l, e);
        double sum = 0.0;  // bf16/fp16 products are exact in float; the sum nearly so
        for (int k = 0; k < 16; ++k)
          sum += static_cast<double>(a[y.row][k]) * static_cast<double>(b[k][y.col]);
        warp[l].c_[e] = static_cast<float>(static_cast<double>(c[y.row][y.col]) + sum);
      }
    ++products_;
  }

  // A cp.async's addresses: 16-byte aligned, the destination inside shared memory.
  void check_cp_async(int thread, const void* dst, const void* src) {
    const char* lo = smem();
    const char* to = static_cast<const char*>(dst);
    const bool bad_dst =
        to < lo || to + 16 > lo + smem_bytes_ || reinterpret_cast<uintptr_t>(to) % 16 != 0;
    const bool bad_src = reinterpret_cast<uintptr_t>(src) % 16 != 0;
    if ((bad_dst || bad_src) && error_.empty())
      error_ = "cp.async of thread " + std::to_string(thread) +
               (bad_dst ? ": destination not 16-byte aligned inside shared memory"
                        : ": source not 16-byte aligned");
  }

  // The warp's ldmatrix: lanes 8m to 8m + 7 address matrix m's rows (16-byte aligned, inside
  // shared memory); lane l receives row l / 4's elements 2 (l % 4) and 2 (l % 4) + 1 of each
  // matrix, or with .trans column l / 4's.
  void resolve_ldm(SimtThread* warp) {
    const int count = warp[0].ldm_count_;
    const bool trans = warp[0].ldm_trans_;
    const char* lo = smem();
    uint16_t m[4][8][8];
    for (int l = 0; l < 32; ++l)
      if (warp[l].ldm_count_ != count || warp[l].ldm_trans_ != trans) {
        error_ = "lanes of one ldmatrix with different shapes";
        return;
      }
    for (int k = 0; k < count; ++k)
      for (int i = 0; i < 8; ++i) {
        const char* row = static_cast<const char*>(warp[8 * k + i].ldm_row_);
        if (row < lo || row + 16 > lo + smem_bytes_ || reinterpret_cast<uintptr_t>(row) % 16) {
          error_ = "ldmatrix row of lane " + std::to_string(8 * k + i) +
                   " not 16-byte aligned inside shared memory";
          return;
        }
        std::memcpy(m[k][i], row, 16);
      }
    for (int l = 0; l < 32; ++l)
      for (int k = 0; k < count; ++k) {
        const int a = l >> 2, b = 2 * (l & 3);
        warp[l].ldm_out_[k] = trans ? kernels::mma::pack(m[k][b][a], m[k][b + 1][a])
                                    : kernels::mma::pack(m[k][a][b], m[k][a][b + 1]);
      }
  }

  int threads_;
  Schedule schedule_;
  size_t smem_bytes_;
  std::vector<char> smem_;
  std::unique_ptr<char[]> stacks_;  // kStackBytes a thread, reused by every run
  const std::function<void(SimtThread&)>* body_ = nullptr;
  Fiber sched_;  // the scheduler's context while a thread runs
  std::string error_;
  int64_t products_ = 0;
};

template <typename T>
void SimtThread::cp_async16(T* dst, const T* src) {
  block_->check_cp_async(id_, dst, src);
  pending_.push_back({dst, src});
}

inline void SimtThread::block_on(Op op) {
  op_ = op;
  Fiber::switch_to(fiber_, block_->sched_);
}

inline void SimtThread::sync() {
  block_on(Op::kSync);
}

inline uint32_t SimtThread::shfl_xor(uint32_t v, int mask) {
  shfl_in_ = v;
  shfl_mask_ = mask;
  block_on(Op::kShfl);
  return shfl_out_;
}

inline float SimtThread::shfl_xor(float v, int mask) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = shfl_xor(bits, mask);
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

inline void SimtThread::mma_any(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                bool bf16) {
  c_ = c;
  a_ = a;
  b_ = b;
  bf16_ = bf16;
  block_on(Op::kMma);
}

}  // namespace mtnlg::test
