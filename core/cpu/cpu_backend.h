// CpuBackend: the Backend of core/backend.h on the host, for f32 (training) and f64 (gradient
// checks); other dtypes throw Code::kUnsupported naming the op. It owns no tensors; alloc()
// returns 64-byte-aligned host memory owned by the tensor handles, counted in live_bytes() /
// peak_bytes() until the last handle goes.
//
// Threads: kernels run OpenMP regions with `threads` threads (set on the calling thread at each
// call, since OpenMP's thread count is a per-thread setting) and single-threaded OpenBLAS inside
// them (see gemm_cpu.cc). Like every Backend, one instance is used by one thread at a time;
// separate instances may run concurrently (ranks as threads in tests).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/cpu/matmul_bf16.h"
#include "core/memory_counter.h"

namespace mtnlg {

class CpuBackend final : public Backend {
 public:
  // threads <= 0: one per core.
  explicit CpuBackend(int threads);

  int threads() const { return threads_; }

  Device device() const override { return Device::kCPU; }
  std::string name() const override;

  int64_t live_bytes() const override;
  int64_t peak_bytes() const override;
  void reset_peak() override;

 protected:
  // Every backend's operations (core/backend_ops.def), then the defaults this backend replaces.
  Tensor do_alloc(const Shape& shape, DType dtype) override;
#define MTNLG_BACKEND_OP(R, name, params) R do_##name params override;
#include "core/backend_ops.def"
#undef MTNLG_BACKEND_OP
  // bf16 inside a frozen-weights window: the weight's oneDNN blocked copy, reordered on its
  // first use in the window and reused until it ends; its memory (counted in live_bytes) is kept
  // for the next window, freed after one that does not use it. Otherwise gemm().
  void do_gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                      double beta) override;
  void do_end_frozen_weights() override;
  void do_hold_weight(const Tensor& w) override;
  // Fused for bf16/fp16 weights on fp32 masters (one pass over memory); else Backend's default.
  void do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWArgs& args) override;

 private:
  void enter() const;  // applies threads_ to the calling thread's OpenMP setting
  void gemm_impl(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                 double alpha, double beta, bool b_weight);
  // Inside a frozen-weights window, refuses a write to memory a held weight copy came from, or
  // that a caller holds (hold_weight).
  void guard_write(const Tensor& t, const char* op) const;
  int threads_;
  std::unique_ptr<cpu::MatmulBf16> matmul_bf16_;  // bf16 GEMMs (oneDNN), primitives cached
  std::shared_ptr<MemoryCounter> counter_ = std::make_shared<MemoryCounter>();
  // The byte ranges hold_weight was given in the open window.
  std::vector<std::pair<const char*, const char*>> held_;
};

}  // namespace mtnlg
