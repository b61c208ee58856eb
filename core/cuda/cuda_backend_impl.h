// The CUDA backend's class (core/cuda/cuda_backend.h makes one): shared by cuda_backend.cu, which
// defines its memory, copies and most operations, and the kernel files that define their
// operations' do_ members beside their kernels (gelu_cuda.cu), so that a new operation's CUDA side
// is one file (docs/backend.md, Adding an operation). Compiled by nvcc only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/backend_checks.h"
#include "core/caching_allocator.h"
#include "core/cuda/attention_workspace.h"
#include "core/cuda/cublas_library.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cudnn_attention.h"
#include "core/cuda/device_overheads.h"
#include "core/cuda/gemm_epilogue.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/pinned_staging.h"
#include "core/env_choice.h"
#include "core/id_checks.h"
#include "core/memory_counter.h"

namespace mtnlg {

// Owners of the backend's stream and cuBLAS handle.
namespace cuda_detail {

struct StreamDeleter {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
struct PinnedDeleter {
  void operator()(uint64_t* p) const { (void)cudaFreeHost(p); }
};
struct CublasDeleter {
  const CublasLibrary* lib = nullptr;
  void operator()(cublasHandle_t h) const { (void)lib->destroy(h); }
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using CublasPtr = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;
using PinnedWords = std::unique_ptr<uint64_t[], PinnedDeleter>;

}  // namespace cuda_detail

class CudaBackend final : public Backend {
  using StreamPtr = cuda_detail::StreamPtr;
  using CublasPtr = cuda_detail::CublasPtr;
  using CublasDeleter = cuda_detail::CublasDeleter;

 public:
  CudaBackend(int device, AttentionBackend attention) : device_(device) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device < 0 || device >= count) {
      throw invalid_argument("CUDA device " + std::to_string(device) + " does not exist: " +
                                 std::to_string(count) + " visible (check CUDA_VISIBLE_DEVICES)",
                             "cuda device");
    }
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    name_ = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
    flash_.compute_major = prop.major;
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    flash_.max_smem_optin = static_cast<size_t>(optin);
    // Attention's kernels (attention_workspace.h, which the planner asks too): by default
    // cuDNN's fused attention where it applies, the FA2-style ones where they apply (bf16/fp16,
    // head sizes 64 and 128), the blocked cuBLAS ones elsewhere; MTNLG_CUDA_ATTENTION=blocked:
    // the blocked ones; flash2-fwd and flash2-bwd: the FA2-style ones in one pass, the blocked
    // ones in the other. A linear
    // layer's bias (and GeLU) in cuBLASLt's epilogue where it applies; MTNLG_CUDA_EPILOGUES=off:
    // separate kernels.
    // Every switch from one reader, the planner's (attention_workspace.h, cuda_switches). The
    // FA2-style forward's query rows a block: 64 (one 16-row m tile a warp) or, with
    // MTNLG_CUDA_FLASH2_ROWS=128, 128 (two; FlashAttention-2's own); the same bits either way.
    const CudaSwitches switches = cuda_switches(attention);
    attention_ = switches.attention;
    flash2_wide_rows_ = switches.flash2_wide_rows;
    epilogues_enabled_ = switches.epilogues;
    cudnn_deterministic_ = switches.cudnn_deterministic;

    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_.reset(stream);
    cublasHandle_t handle = nullptr;
    CUBLAS_CHECK(cublas_lib_.create(&handle));
    cublas_ = CublasPtr(handle, CublasDeleter{&cublas_lib_});
    CUBLAS_CHECK(cublas_lib_.set_stream(handle, stream));
    // One BLAS workspace for cuBLAS and cuBLASLt, from the cache (core/cuda/device_overheads.h),
    // named after the stream: cublasSetStream puts cuBLAS back on its own workspace pool.
    const auto blas_bytes = static_cast<size_t>(blas_workspace_bytes(prop.major));
    void* blas_workspace = blas_ws_.get(blas_bytes);
    CUBLAS_CHECK(cublas_lib_.set_workspace(handle, blas_workspace, blas_bytes));
    epilogue_ = std::make_unique<EpilogueGemm>(blas_workspace, blas_bytes);
    fixed_.emplace(*cache_, static_cast<size_t>(kCudaBackendScratchBytes));
    CUDA_CHECK(cudaMemsetAsync(id_words(), 0xff, kIdCheckWords * sizeof(uint64_t), stream));
    CUDA_CHECK(cudaMemsetAsync(rng_base_word(), 0, sizeof(uint64_t), stream));
    uint64_t* words = nullptr;
    CUDA_CHECK(cudaMallocHost(&words, kIdCheckWords * sizeof(uint64_t)));
    id_words_host_.reset(words);
  }

  Device device() const override { return Device::kCUDA; }
  std::string name() const override { return name_; }

  int64_t live_bytes() const override { return counter_->live(); }
  int64_t peak_reserved_bytes() const override { return cache_->peak_reserved_bytes(); }
  int64_t reserved_bytes() const override { return cache_->reserved_bytes(); }
  int64_t device_bytes_in_use() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;  // a report, not a check: the next CUDA call says what is wrong
    }
    return static_cast<int64_t>(total_bytes - free_bytes);
  }
  int64_t peak_bytes() const override { return counter_->peak(); }
  void reset_peak() override { counter_->reset_peak(); }

  // Raises a bad id that a check queued since the last synchronization found (check_ids).
  void synchronize() override {
    with_id_checks([&] {
      CUDA_CHECK(cudaStreamSynchronize(stream()));
      return 0;
    });
  }
  void* native_stream() const override { return stream_.get(); }
  int64_t host_waits() const override { return host_waits_ + staging_.waits(); }
  // A CUDA graph of the work (core/cuda/cuda_graph.cu).
  std::unique_ptr<CapturedWork> capture(std::function<void()> work) override;
  // A captured graph's replay: its id checks pending again (words 0..k), then one launch.
  void replay_graph(cudaGraphExec_t exec, const std::vector<DeferredIdChecks::Check>& ids);

 protected:
  // The base word written by a kernel in stream order (the work queued before still reads the
  // previous one), never during a capture: the graph would keep the value.
  void do_set_rng_stream_base(uint64_t base) override {
    refuse_in_capture("set_rng_stream_base", "writing the random streams' base");
    if (base == rng_base_ && base == 0) return;
    store_words_cuda(reinterpret_cast<int64_t*>(rng_base_word()),
                     {static_cast<int64_t>(base), 0, 0, 0}, stream(), 1);
    rng_base_ = base;
  }
  // The device word while capturing (a replay reads what is written then) or while not 0.
  const uint64_t* rng_stream_base() const override {
    return capturing_ || rng_base_ != 0 ? rng_base_word() : nullptr;
  }

  // Every backend's operations (core/backend_ops.def), defined in cuda_backend.cu or beside
  // their kernels (core/cuda/<family>_cuda.cu), then the defaults this backend replaces.
  Tensor do_alloc(const Shape& shape, DType dtype) override;
#define MTNLG_BACKEND_OP(R, name, params) R do_##name params override;
#include "core/backend_ops.def"
#undef MTNLG_BACKEND_OP
  std::vector<double> do_sum_squares_many(const std::vector<Tensor>& xs) override;
  void do_cross_entropy_forward_add(Tensor& total, const Tensor& logits, const Tensor& targets,
                                    int64_t vocab) override;
  void do_gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout, const Tensor& in,
                             Activation act) override;
  // cuBLASLt with the bias (and the tanh GeLU) in the epilogue where it applies
  // (core/cuda/gemm_epilogue.h); the exact GeLU, which cuBLASLt lacks, after it; else the
  // separate operations.
  void do_linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                              Tensor* gelu_out, Activation act) override;
  // cuBLASLt's FP8 GEMM on the operands packed as FP8 bytes (core/cuda/fp8_cuda.cu) where it
  // applies; else the bf16 GEMM on the same values (logged once).
  // The cast kernel raising the caller's word on the device: no read back.
  void do_fp8_cast_accumulate(Tensor& out, const Tensor& in, double scale, Fp8Format format,
                              Tensor& amax_bits) override;
  void do_gemm_fp8(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                   double alpha, double beta, Fp8Format fa, Fp8Format fb) override;
  void do_dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                      RngStream rng) override;
  void do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWArgs& args) override;
  // Every item checked first, then up to 32 tensors of a kind per launch.
  void do_adamw_update_many(const std::vector<AdamWItem>& items) override;
  // The step words on the device (AdamWStepWords): the sums into their tensor, the clip by one
  // thread, the batched step reading the words; nothing waits, so a capture records them.
  void do_sum_squares_into(Tensor& sums, const std::vector<Tensor>& xs) override;
  void do_grad_clip_words(Tensor& words, const Tensor& sums, int64_t first, const Tensor& loss,
                          double max_norm) override;
  void do_adamw_update_many_from(const std::vector<AdamWItem>& items, const Tensor& words) override;

 private:
  static constexpr const char* kVocabFix =
      "the data's vocabulary is larger than the model's (check model.vocab_size)";

  cudaStream_t stream() const {
    return stream_.get();
  }
  Blas blas() const {
    return {&cublas_lib_, cublas_.get()};
  }

  // The fused rounded step's kernels: a bf16 or fp16 param on an fp32 master (Backend's front
  // checked the rest of the contract).
  static void check_rounded_dtypes(const Tensor& param, const Tensor& master, const char* op) {
    MTNLG_CHECK_MSG(param.dtype() == DType::kBF16 || param.dtype() == DType::kF16,
                    op << ": param " << param.str() << " (bf16 or f16)");
    MTNLG_CHECK_MSG(master.dtype() == DType::kF32, op << ": master " << master.str() << " (f32)");
  }
  // The batched steps' dtypes: each item rounded (above) or f32/f64 stepped in place.
  static void check_many_dtypes(const std::vector<AdamWItem>& items, const char* op) {
    for (const AdamWItem& it : items) {
      if (it.master != nullptr) {
        check_rounded_dtypes(*it.param, *it.master, op);
      } else {
        MTNLG_CHECK_MSG(it.param->dtype() == DType::kF32 || it.param->dtype() == DType::kF64,
                        op << ": param " << it.param->str()
                           << " (f32 or f64; a bf16/fp16 model steps its fp32 masters)");
      }
    }
  }

  double* sum_scratch() const {
    return static_cast<double*>(fixed_->data());
  }
  // The deferred id checks' words (check_ids), after sum_scratch's doubles.
  uint64_t* id_words() const {
    return reinterpret_cast<uint64_t*>(sum_scratch() + kSumSquaresScratch);
  }
  // set_rng_stream_base's word, after the id checks' words.
  uint64_t* rng_base_word() const {
    return id_words() + kIdCheckWords;
  }
  // abs_max's and fp8_cast's largest magnitude, after the base word.
  unsigned* amax_word() const {
    return reinterpret_cast<unsigned*>(rng_base_word() + 1);
  }
  // Whether a pass whose chosen family is `k` runs the FA2-style (flash) kernels: chosen, and
  // they apply to these tensors, at a head size measured on a GPU unless MTNLG_CUDA_ATTENTION
  // named them (flash2_attention_planned, the planner's rule).
  // The family a pass runs: cuDNN's where it was chosen and takes the call (the planner's rule,
  // cudnn_attention_planned, and cuDNN on this machine running the shape); where it does not,
  // by default the FA2-style kernels (use_flash2 then decides where they apply), named the
  // blocked ones. Any other choice as it is (use_flash/use_flash2 decide where they apply).
  AttentionKernels family(AttentionKernels k, const Tensor& qkv, int64_t heads, double p) {
    if (k != AttentionKernels::kCudnn) return k;
    const int64_t hd = qkv.dim(2) / (3 * heads);
    if (cudnn_attention_planned(static_cast<int64_t>(dtype_size(qkv.dtype())), hd) &&
        cudnn_takes(qkv, heads, hd, p))
      return AttentionKernels::kCudnn;
    return attention_.cudnn_named ? AttentionKernels::kBlocked : AttentionKernels::kFlash2;
  }
#ifdef MTNLG_HAVE_CUDNN
  bool cudnn_takes(const Tensor& qkv, int64_t heads, int64_t hd, double p) {
    if (!cudnn_tried_) {
      cudnn_tried_ = true;
      cudnn_ = CudnnAttention::open(stream(), cudnn_deterministic_, attention_.cudnn_named);
    }
    return cudnn_ && cudnn_->takes(qkv.dim(0), qkv.dim(1), heads, hd, qkv.dtype(), p);
  }
  void cudnn_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads, double p,
                     RngStream rng) {
    cudnn_->forward(out, stats, qkv, heads, p, rng, ws_);
  }
  void cudnn_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                      const Tensor& stats, int64_t heads, double p, RngStream rng) {
    cudnn_->backward(dqkv, dout, qkv, out, stats, heads, p, rng, ws_);
  }
#else
  // Built without cuDNN's headers: named, an error; by default, the other kernels.
  bool cudnn_takes(const Tensor&, int64_t, int64_t, double) {
    if (attention_.cudnn_named)
      throw unsupported(
          "MTNLG_CUDA_ATTENTION=cudnn: this build found no cuDNN headers (cudnn_graph.h); "
          "configure with -DCUDNN_ROOT=... (the folder holding include/cudnn_graph.h) or choose "
          "flash2 or blocked",
          "MTNLG_CUDA_ATTENTION");
    return false;
  }
  [[noreturn]] void cudnn_unreachable() const {
    throw std::logic_error("cuDNN attention chosen in a build without cuDNN");
  }
  void cudnn_forward(Tensor&, Tensor&, const Tensor&, int64_t, double, RngStream) {
    cudnn_unreachable();
  }
  void cudnn_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                      double, RngStream) {
    cudnn_unreachable();
  }
#endif
  bool use_flash2(AttentionKernels k, const Tensor& qkv, int64_t heads,
                  std::initializer_list<const Tensor*> others) {
    if (k != AttentionKernels::kFlash2 || !flash2_attention_applies(flash_, qkv, heads, others))
      return false;
    return attention_.flash2_named || kernels::flash2::head_dim_measured(qkv.dim(2) / (3 * heads));
  }

  // Ids from data are checked on the device without waiting for it: the check's kernel lowers a
  // word the host reads back at its next synchronization (with_id_checks), which raises a bad
  // id as the CPU does (core/id_checks.h), naming the operation and the position. Until then
  // the kernels that read ids leave a bad one out (kernels::shard_index) and never index with
  // it: a micro-batch's checks used to cost four waits for the GPU.
  void check_ids(const Tensor& ids, int64_t limit, const char* op, const char* what,
                 const char* fix) {
    const int64_t n = ids.numel();
    if (n == 0) return;
    MTNLG_CHECK_MSG(n <= int64_t{0xffffffff},
                    op << ": " << ids.str() << " (positions fit 32 bits)");
    if (id_checks_.full()) {
      refuse_in_capture(op, "more id checks than the backend's words (64) between two reads");
      synchronize();
    }
    const int slot = id_checks_.add(op, what, limit, fix);
    check_ids_cuda(ids, limit, id_words() + slot, stream());
  }

  // While capture() records: what a replay could not repeat is an error naming it.
  void refuse_in_capture(const char* op, const char* what) const {
    if (!capturing_) return;
    throw unsupported(std::string(op) + ": " + what +
                          " inside a captured step (Backend::capture): do it before or after "
                          "the captured work",
                      "cuda graph");
  }

  // Runs `wait`, which ends in a wait for the stream (a value read back to the host), with the
  // pending id checks' words copied back in the same wait; then raises the first bad id they
  // found. The copy and the words' reset are queued before any later check's kernel.
  template <typename F>
  std::invoke_result_t<F&> with_id_checks(F&& wait) {
    static_assert(DeferredIdChecks::kSlots == kIdCheckWords);
    refuse_in_capture("a read back", "a wait for the device");
    const int n = id_checks_.begin_read();
    if (n > 0) {
      const size_t bytes = static_cast<size_t>(n) * sizeof(uint64_t);
      CUDA_CHECK(cudaMemcpyAsync(id_words_host_.get(), id_words(), bytes, cudaMemcpyDeviceToHost,
                                 stream()));
      CUDA_CHECK(cudaMemsetAsync(id_words(), 0xff, bytes, stream()));
    }
    ++host_waits_;
    auto value = wait();
    id_checks_.end_read(id_words_host_.get());
    return value;
  }

  // The vocab-parallel cross entropy's shared checks; returns (rows, real columns). Targets are
  // range-checked once per micro-batch, in the forward's stats step (one synchronization).
  int device_;
  std::string name_;
  FlashDevice flash_;
  AttentionChoice attention_{AttentionKernels::kFlash2};
  bool cudnn_deterministic_ = true;
  bool epilogues_enabled_ = true;
  bool flash2_wide_rows_ = false;     // MTNLG_CUDA_FLASH2_ROWS=128
  bool fp8_fallback_logged_ = false;  // do_gemm_fp8 said once that the bf16 GEMM runs
  // Bytes alloc() handed out and not yet freed (cudaMalloc'ed sizes; excludes cuBLAS workspace,
  // the backend's own scratch and the CUDA context).
  std::shared_ptr<MemoryCounter> counter_ = std::make_shared<MemoryCounter>();
  // Device memory for alloc(): cudaMalloc'ed blocks kept for reuse. Out of memory is nullptr
  // (the allocator then releases its cache and retries); cudaFree's status is dropped, as a
  // deleter must not throw and at exit the driver may be gone already.
  std::shared_ptr<CachingAllocator> cache_ = std::make_shared<CachingAllocator>(
      [](size_t n) -> void* {
        void* p = nullptr;
        const cudaError_t err = cudaMalloc(&p, n);
        if (err == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();
          return nullptr;
        }
        CUDA_CHECK(err);
        return p;
      },
      [](void* p) { (void)cudaFree(p); });
  // Declared before the blocks from cache_, so that their work is queued on a live stream.
  StreamPtr stream_;
  PinnedStaging staging_;   // small uploads (do_copy); after stream_: its copies finish first
  bool capturing_ = false;  // capture() is recording the stream
  uint64_t rng_base_ = 0;   // the value last written to rng_base_word()
  int64_t host_waits_ = 0;  // with_id_checks' waits: every wait for the stream goes through it
  Workspace blas_ws_{*cache_, recording_epoch_,
                     capturing_};  // cuBLAS's and cuBLASLt's: outlives both handles
  CublasLibrary cublas_lib_;       // before cublas_: the handle is destroyed through it
  CublasPtr cublas_;
  // kSumSquaresScratch doubles for sum_squares (and cross entropy's total), the id checks'
  // words, the random streams' base, then abs_max's word: core/cuda/device_overheads.h's
  // kCudaBackendScratchBytes, which the plan counts. Made in the constructor's body, once the
  // device is current.
  std::optional<DeviceBlock> fixed_;
  DeferredIdChecks id_checks_;
  cuda_detail::PinnedWords id_words_host_;  // pinned: the words' copy back queues without a wait
  Workspace ws_{
      *cache_, recording_epoch_,
      capturing_};  // launchers' temporaries (attention scores, column-sum partials, sorts)
  // cuBLASLt, made in the constructor's body once the device is current and blas_ws_ holds the
  // workspace (a member initializer would put it on whichever GPU was current).
  std::unique_ptr<EpilogueGemm> epilogue_;
#ifdef MTNLG_HAVE_CUDNN
  // cuDNN's attention, opened on first use (null where it is missing and was not named); last,
  // so destroyed while the stream lives.
  bool cudnn_tried_ = false;
  std::unique_ptr<CudnnAttention> cudnn_;
#endif
};

}  // namespace mtnlg
