// CudaBackend (its class: core/cuda/cuda_backend_impl.h): memory, copies, the GEMMs and
// attention, whose kernels are in several files; every other operation is defined beside its
// kernels (core/cuda/<family>_cuda.cu, docs/backend.md).
#include "core/cuda/cuda_backend_impl.h"

#include <cstdlib>
#include <cstring>

namespace mtnlg {

namespace {

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

}  // namespace

Tensor CudaBackend::do_alloc(const Shape& shape, DType dtype) {
  // A replay would write into the block long after the tensor went back to the cache.
  refuse_in_capture("alloc", "an allocation");
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = cache_->allocate(bytes);
  if (bytes && p == nullptr) {
    std::ostringstream os;
    os << "out of GPU memory: " << bytes << " bytes for " << dtype_name(dtype) << shape_str(shape)
       << " with " << counter_->live() << " bytes of tensors live (" << cache_->reserved_bytes()
       << " reserved, the cache already released); lower "
       << "parallel.micro_batch_size, turn on parallel.activation_checkpointing, or use more "
          "tensor/pipeline ranks (--dry-run prints the plan)";
    throw Error(Code::kInvalidArgument, os.str(), "cuda alloc");
  }
  // Back to the cache, reused in stream order (core/caching_allocator.h).
  auto storage = std::make_shared<Storage>(
      p, bytes, Device::kCUDA,
      [cache = cache_, counter = counter_, n = static_cast<int64_t>(bytes)](void* q) {
        cache->release(q, static_cast<size_t>(n));
        counter->freed(n);
      });
  counter_->allocated(static_cast<int64_t>(bytes));
  if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
  return Tensor(std::move(storage), 0, shape, dtype);
}

void CudaBackend::do_copy(Tensor& dst, const Tensor& src) {
  MTNLG_CHECK_MSG(dst.numel() == src.numel(), "copy: " << dst.str() << " = " << src.str());
  const bool dst_dev = dst.device() == Device::kCUDA, src_dev = src.device() == Device::kCUDA;
  if (!dst_dev || !src_dev) refuse_in_capture("copy", "a copy from or to the host");
  if (!dst_dev && !src_dev) {
    copy_on_host(dst, src);
    return;
  }
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    // A small upload (a micro-batch's ids) goes through pinned buffers and waits for nothing.
    if (dst_dev && !src_dev && src.nbytes() <= PinnedStaging::kMaxBytes) {
      staging_.upload(dst.data(), src.data(), src.nbytes(), stream());
      return;
    }
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault, stream()));
    // Host memory is pageable: wait so the caller may read (or free) it on return.
    if (!dst_dev || !src_dev) synchronize();
    return;
  }
  // Conversions run on the device; a host side first moves as is through a device buffer.
  if (dst_dev && src_dev) {
    convert_cuda(dst, src, stream());
  } else if (dst_dev) {
    Tensor staged = alloc(src.shape(), src.dtype());
    do_copy(staged, src);
    convert_cuda(dst, staged, stream());
  } else {
    Tensor staged = alloc(src.shape(), dst.dtype());
    convert_cuda(staged, src, stream());
    do_copy(dst, staged);
  }
}

void CudaBackend::do_gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                          double alpha, double beta) {
  gemm_cuda(blas(), c, a, trans_a, b, trans_b, alpha, beta);
}

void CudaBackend::do_linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w,
                                         const Tensor& bias, Tensor* gelu_out, Activation act) {
  if (epilogues_enabled_) {
    const bool fuse_gelu = gelu_out != nullptr && act == Activation::kGeluTanh;
    if (epilogue_->linear_bias(y, x, w, bias, fuse_gelu ? gelu_out : nullptr, stream())) {
      if (gelu_out != nullptr && !fuse_gelu) gelu_forward(*gelu_out, y, act);
      return;
    }
  }
  Backend::do_linear_bias_forward(y, x, w, bias, gelu_out, act);  // the default
}

void CudaBackend::do_attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                                       double dropout_p, RngStream rng) {
  const AttentionKernels k = family(attention_.forward, qkv, heads, dropout_p);
  if (k == AttentionKernels::kCudnn)
    cudnn_forward(out, stats, qkv, heads, dropout_p, rng);
  else if (use_flash2(k, qkv, heads, {&out}))
    flash2_forward_cuda(out, stats, qkv, heads, dropout_p, rng, flash2_wide_rows_, stream());
  else
    attention_forward_cuda(blas(), out, stats, qkv, heads, dropout_p, rng, ws_);
}

void CudaBackend::do_attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                        const Tensor& out, const Tensor& stats, int64_t heads,
                                        double dropout_p, RngStream rng) {
  // out is forward's (checked): the FA2-style and cuDNN softmax backwards take delta_i =
  // dO_i . O_i from it (the blocked kernels recompute whole rows and do not read it).
  const int64_t b = qkv.dim(0), s = qkv.dim(1);
  const AttentionKernels k = family(attention_.backward, qkv, heads, dropout_p);
  if (k == AttentionKernels::kCudnn)
    cudnn_backward(dqkv, dout, qkv, out, stats, heads, dropout_p, rng);
  else if (use_flash2(k, qkv, heads, {&dqkv, &dout, &out}))
    flash2_backward_cuda(dqkv, dout, qkv, out, stats, heads, dropout_p, rng,
                         attention_.flash2_stores_ds(b, heads, s), ws_, stream());
  else
    attention_backward_cuda(blas(), dqkv, dout, qkv, stats, heads, dropout_p, rng, ws_);
}

DeviceBlock::DeviceBlock(CachingAllocator& cache, size_t bytes)
    : cache_(cache), bytes_(bytes), ptr_(cache.allocate(bytes)) {
  if (ptr_ == nullptr)
    throw Error(Code::kInvalidArgument,
                "out of GPU memory: " + std::to_string(bytes) +
                    " bytes of the CUDA backend's "
                    "own scratch; another process may hold the GPU (nvidia-smi)",
                "cuda scratch");
}

DeviceBlock::~DeviceBlock() {
  cache_.release(ptr_, bytes_);
}

Workspace::~Workspace() {
  if (ptr_) cache_.release(ptr_, bytes_);
}

void* Workspace::get(size_t bytes) {
  if (bytes <= bytes_) return ptr_;
  if (capturing_)
    throw unsupported("the CUDA backend's scratch growing to " + std::to_string(bytes) +
                          " bytes inside a captured step (Backend::capture): run the work once "
                          "plainly before recording it",
                      "cuda graph");
  // Work queued on the old block runs before any later owner's (one stream): back to the cache.
  // A recording that holds its address is stale from now on.
  if (ptr_) {
    cache_.release(ptr_, bytes_);
    ++moves_;
  }
  ptr_ = nullptr;
  bytes_ = 0;
  const size_t rounded = (bytes + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
  ptr_ = cache_.allocate(rounded);
  if (ptr_ == nullptr)
    throw Error(Code::kInvalidArgument,
                "out of GPU memory: " + std::to_string(rounded) + " bytes of kernel scratch with " +
                    std::to_string(cache_.reserved_bytes()) +
                    " reserved, the cache already released (attention's over one sequence is "
                    "the largest: --dry-run's cuda_attention_scratch_bytes); lower "
                    "parallel.micro_batch_size, model.seq_length, or use more tensor ranks",
                "cuda scratch");
  bytes_ = rounded;
  return ptr_;
}

std::unique_ptr<Backend> make_cuda_backend(int device, AttentionBackend attention) {
  return std::make_unique<CudaBackend>(device, attention);
}

}  // namespace mtnlg
