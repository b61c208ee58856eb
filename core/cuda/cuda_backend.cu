// CudaBackend: argument checks, memory and copies here; the arithmetic is in the launchers of
// core/cuda/kernels_cuda.h, one concept per .cu file.
#include "core/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/memory_counter.h"

namespace mtnlg {

namespace {

struct StreamDeleter {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const { (void)cublasDestroy(h); }
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using CublasPtr = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;

Error not_yet(const char* op) {
  return unsupported(std::string(op) +
                     " is not yet implemented on CUDA; the CUDA kernels land with the CUDA backend "
                     "issue (train with the CPU backend meanwhile)");
}

void require_cuda(const Tensor& t, const char* op, const char* arg) {
  MTNLG_CHECK_MSG(t.defined() && t.device() == Device::kCUDA,
                  op << ": " << arg << " must be a CUDA tensor, got "
                     << (t.defined() ? t.str() : std::string("undefined")));
}

void require_same(const Tensor& a, const Tensor& b, const char* op) {
  MTNLG_CHECK_MSG(a.dtype() == b.dtype() && a.numel() == b.numel(),
                  op << ": " << a.str() << " vs " << b.str());
}

// Host-side f32<->f64 or same-dtype copy, for copy() between two CPU tensors.
void copy_on_host(Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (dst.dtype() == src.dtype()) {
    if (n) std::memcpy(dst.data(), src.data(), src.nbytes());
  } else if (dst.dtype() == DType::kF64 && src.dtype() == DType::kF32) {
    for (int64_t i = 0; i < n; ++i) dst.data_as<double>()[i] = src.data_as<float>()[i];
  } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kF64) {
    for (int64_t i = 0; i < n; ++i) {
      dst.data_as<float>()[i] = static_cast<float>(src.data_as<double>()[i]);
    }
  } else {
    throw unsupported(std::string("copy from ") + dtype_name(src.dtype()) + " to " +
                      dtype_name(dst.dtype()) + ": only f32<->f64 convert");
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
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

    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_.reset(stream);
    cublasHandle_t handle = nullptr;
    CUBLAS_CHECK(cublasCreate(&handle));
    cublas_.reset(handle);
    CUBLAS_CHECK(cublasSetStream(handle, stream));
    scratch_ = alloc({kSumSquaresScratch}, DType::kF64);
  }

  Device device() const override { return Device::kCUDA; }
  std::string name() const override { return name_; }

  // ---- memory ----
  Tensor alloc(const Shape& shape, DType dtype) override {
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    void* p = nullptr;
    if (bytes) CUDA_CHECK(cudaMalloc(&p, bytes));
    // cudaFree waits for the device, so pending kernels finish before the memory goes. Its
    // status is dropped: a deleter must not throw, and at exit the driver may be gone already.
    auto storage = std::make_shared<Storage>(
        p, bytes, Device::kCUDA, [counter = counter_, n = static_cast<int64_t>(bytes)](void* q) {
          if (q) (void)cudaFree(q);
          counter->freed(n);
        });
    counter_->allocated(static_cast<int64_t>(bytes));
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
    return Tensor(std::move(storage), 0, shape, dtype);
  }

  int64_t live_bytes() const override { return counter_->live(); }
  int64_t peak_bytes() const override { return counter_->peak(); }
  void reset_peak() override { counter_->reset_peak(); }

  void fill(Tensor& t, double value) override {
    require_cuda(t, "fill", "t");
    fill_cuda(t, value, stream());
  }

  void copy(Tensor& dst, const Tensor& src) override {
    MTNLG_CHECK_MSG(dst.numel() == src.numel(), "copy: " << dst.str() << " = " << src.str());
    const bool dst_dev = dst.device() == Device::kCUDA, src_dev = src.device() == Device::kCUDA;
    if (!dst_dev && !src_dev) {
      copy_on_host(dst, src);
      return;
    }
    if (dst.numel() == 0) return;
    if (dst.dtype() == src.dtype()) {
      CUDA_CHECK(
          cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault, stream()));
      // Host memory is pageable: wait so the caller may read (or free) it on return.
      if (!dst_dev || !src_dev) synchronize();
      return;
    }
    // Conversions run on the device; a host side first moves as is through a device buffer.
    if (dst_dev && src_dev) {
      convert_cuda(dst, src, stream());
    } else if (dst_dev) {
      Tensor staged = alloc(src.shape(), src.dtype());
      copy(staged, src);
      convert_cuda(dst, staged, stream());
    } else {
      Tensor staged = alloc(src.shape(), dst.dtype());
      convert_cuda(staged, src, stream());
      copy(dst, staged);
    }
  }

  // ---- dense algebra ----
  void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, double alpha,
            double beta) override {
    require_cuda(c, "gemm", "c");
    require_cuda(a, "gemm", "a");
    require_cuda(b, "gemm", "b");
    MTNLG_CHECK_MSG(a.dtype() == c.dtype() && b.dtype() == c.dtype(),
                    "gemm: " << c.str() << " = " << a.str() << " @ " << b.str());
    gemm_cuda(cublas_.get(), c, a, trans_a, b, trans_b, alpha, beta);
  }

  void add_bias(Tensor& y, const Tensor& bias) override {
    require_cuda(y, "add_bias", "y");
    require_cuda(bias, "add_bias", "bias");
    MTNLG_CHECK_MSG(y.dtype() == bias.dtype() && y.ndim() >= 1 && y.dim(-1) == bias.numel(),
                    "add_bias: " << y.str() << " += " << bias.str());
    add_bias_cuda(y, bias, stream());
  }

  void bias_backward(Tensor& dbias, const Tensor& dy) override {
    require_cuda(dbias, "bias_backward", "dbias");
    require_cuda(dy, "bias_backward", "dy");
    MTNLG_CHECK_MSG(dy.dtype() == dbias.dtype() && dy.ndim() >= 1 && dy.dim(-1) == dbias.numel(),
                    "bias_backward: " << dbias.str() << " += sum " << dy.str());
    bias_backward_cuda(dbias, dy, stream());
  }

  void add(Tensor& out, const Tensor& a, const Tensor& b) override {
    require_cuda(out, "add", "out");
    require_cuda(a, "add", "a");
    require_cuda(b, "add", "b");
    require_same(out, a, "add");
    require_same(out, b, "add");
    add_cuda(out, a, b, stream());
  }

  void axpy(Tensor& y, const Tensor& x, double alpha) override {
    require_cuda(y, "axpy", "y");
    require_cuda(x, "axpy", "x");
    require_same(y, x, "axpy");
    axpy_cuda(y, x, alpha, stream());
  }

  void scale(Tensor& x, double alpha) override {
    require_cuda(x, "scale", "x");
    scale_cuda(x, alpha, stream());
  }

  double sum_squares(const Tensor& x) override {
    require_cuda(x, "sum_squares", "x");
    return sum_squares_cuda(x, scratch_.data_as<double>(), stream());
  }

  // ---- layers ----
  void layernorm_forward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         double) override {
    throw not_yet("layernorm_forward");
  }
  void layernorm_backward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&) override {
    throw not_yet("layernorm_backward");
  }

  void gelu_forward(Tensor& out, const Tensor& in, Activation act) override {
    require_cuda(out, "gelu_forward", "out");
    require_cuda(in, "gelu_forward", "in");
    require_same(out, in, "gelu_forward");
    gelu_forward_cuda(out, in, act, stream());
  }
  void gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) override {
    require_cuda(din, "gelu_backward", "din");
    require_cuda(dout, "gelu_backward", "dout");
    require_cuda(in, "gelu_backward", "in");
    require_same(din, dout, "gelu_backward");
    require_same(din, in, "gelu_backward");
    gelu_backward_cuda(din, dout, in, act, stream());
  }

  void attention_forward(Tensor&, Tensor&, const Tensor&, int64_t, double, RngStream) override {
    throw not_yet("attention_forward");
  }
  void attention_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, double,
                          RngStream) override {
    throw not_yet("attention_backward");
  }

  void embedding_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
    throw not_yet("embedding_forward");
  }
  void embedding_backward(Tensor&, Tensor&, const Tensor&, const Tensor&) override {
    throw not_yet("embedding_backward");
  }

  double cross_entropy_forward(const Tensor&, const Tensor&, int64_t) override {
    throw not_yet("cross_entropy_forward");
  }
  void cross_entropy_backward(Tensor&, const Tensor&, const Tensor&, int64_t, double) override {
    throw not_yet("cross_entropy_backward");
  }

  void dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) override {
    require_cuda(out, "dropout_forward", "out");
    require_cuda(in, "dropout_forward", "in");
    require_same(out, in, "dropout_forward");
    dropout_forward_cuda(out, in, p, rng, stream());
  }
  void dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) override {
    require_cuda(din, "dropout_backward", "din");
    require_cuda(dout, "dropout_backward", "dout");
    require_same(din, dout, "dropout_backward");
    dropout_backward_cuda(din, dout, p, rng, stream());
  }

  // ---- optimizer ----
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWArgs& args) override {
    require_cuda(param, "adamw_update", "param");
    require_cuda(grad, "adamw_update", "grad");
    require_cuda(m, "adamw_update", "m");
    require_cuda(v, "adamw_update", "v");
    require_same(param, grad, "adamw_update");
    require_same(param, m, "adamw_update");
    require_same(param, v, "adamw_update");
    adamw_update_cuda(param, grad, m, v, args, stream());
  }

  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream())); }

 private:
  cudaStream_t stream() const { return stream_.get(); }

  int device_;
  std::string name_;
  // Bytes alloc() handed out and not yet freed (cudaMalloc'ed sizes; excludes cuBLAS workspace
  // and the CUDA context). Before scratch_: the scratch buffer's deleter decrements it.
  std::shared_ptr<MemoryCounter> counter_ = std::make_shared<MemoryCounter>();
  // Declared before scratch_ so that the stream outlives the scratch buffer's cudaFree.
  StreamPtr stream_;
  CublasPtr cublas_;
  Tensor scratch_;  // kSumSquaresScratch doubles for sum_squares
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

}  // namespace mtnlg
