// Token + position embedding on CUDA, whole or one vocab-parallel shard of the word rows.
// Forward: a thread per output element. Backward is deterministic and matches the CPU's order:
// positions are stably sorted by local row (CUB radix sort; tokens another rank holds sort last
// and are skipped), and one block per distinct row adds that row's tokens into its dwte row in
// position order (the CPU adds rows in position order too, so fp32 sums agree bit for bit). dwpe
// sums the batch in order per position.
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/id_checks.h"
#include "core/kernels/vocab_shard_math.h"

namespace mtnlg {

namespace {

// The lowest bad position wins: it is the word's high half (DeferredIdChecks::pack).
__global__ void check_ids_kernel(const int32_t* ids, int64_t n, int64_t limit,
                                 unsigned long long* word) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int32_t id = ids[i];
    if (id < 0 || id >= limit) {
      atomicMin(word, static_cast<unsigned long long>(
                          DeferredIdChecks::pack(static_cast<uint32_t>(i), id)));
    }
  }
}

// wpe may be null (no positions); a token outside [start, start + rows) contributes 0.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, int64_t rows,
                                         int64_t start, const T* wpe, int64_t n, int64_t s,
                                         int64_t c) {
  using A = acc_t<T>;
  for (int64_t e = first_index(); e < n * c; e += grid_stride()) {
    const int64_t r = e / c, j = e % c;
    const int64_t local = kernels::shard_index(tokens[r], start, rows);
    A v = local >= 0 ? static_cast<A>(wte[local * c + j]) : A(0);
    if (wpe != nullptr)
      v = local >= 0 ? v + static_cast<A>(wpe[(r % s) * c + j])
                     : static_cast<A>(wpe[(r % s) * c + j]);
    out[e] = static_cast<T>(v);
  }
}

// The sort's inputs: each position's local row (rows when another rank holds the token, which
// sorts after every held row) and the position itself.
__global__ void local_rows_kernel(int32_t* local, int32_t* pos, const int32_t* tokens, int64_t rows,
                                  int64_t start, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t l = kernels::shard_index(tokens[i], start, rows);
    local[i] = static_cast<int32_t>(l >= 0 ? l : rows);
    pos[i] = static_cast<int32_t>(i);
  }
}

// Block (p, column block): when sorted position p starts a run of equal held rows, adds the
// run's gradients (in position order) into that dwte row.
template <typename T>
__global__ void embedding_wte_backward_kernel(acc_t<T>* dwte, const T* dout, const int32_t* ids,
                                              const int32_t* pos, int64_t rows, int64_t n,
                                              int64_t c) {
  using A = acc_t<T>;
  const int64_t p = blockIdx.x;
  const int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int32_t id = ids[p];
  if (id == rows || (p > 0 && ids[p - 1] == id)) return;
  A* row = dwte + static_cast<int64_t>(id) * c;
  A acc = row[j];
  for (int64_t q = p; q < n && ids[q] == id; ++q)
    acc += static_cast<A>(dout[static_cast<int64_t>(pos[q]) * c + j]);
  row[j] = acc;
}

template <typename T>
__global__ void embedding_wpe_backward_kernel(acc_t<T>* dwpe, const T* dout, int64_t b, int64_t s,
                                              int64_t c) {
  using A = acc_t<T>;
  for (int64_t e = first_index(); e < s * c; e += grid_stride()) {
    const int64_t t = e / c, j = e % c;
    A acc = dwpe[e];
    for (int64_t bi = 0; bi < b; ++bi) acc += static_cast<A>(dout[(bi * s + t) * c + j]);
    dwpe[e] = acc;
  }
}

int bits_for(int64_t limit) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < limit) ++bits;
  return bits;
}

}  // namespace

void check_ids_cuda(const Tensor& ids, int64_t limit, uint64_t* word, cudaStream_t stream) {
  const int64_t n = ids.numel();
  if (n == 0) return;
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t));
  check_ids_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(
      ids.data_as<int32_t>(), n, limit, reinterpret_cast<unsigned long long*>(word));
  CUDA_CHECK(cudaGetLastError());
}

namespace {

// wte holds word rows [vocab_start, vocab_start + wte rows) (the whole table: 0, the token ids
// checked by check_ids_cuda, which raises at the host's next synchronization); other tokens,
// bad ones too, give 0. wpe may be undefined (no
// positions): Backend::embedding_shard_forward.
void embedding_forward_cuda(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                            int64_t vocab_start, cudaStream_t stream) {
  const int64_t n = tokens.numel(), s = tokens.dim(1), c = wte.dim(1);
  if (n == 0 || c == 0) return;
  dispatch_dtype(Device::kCUDA, wte.dtype(), "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    embedding_forward_kernel<<<cuda_grid(n * c), kCudaBlock, 0, stream>>>(
        out.data_as<T>(), tokens.data_as<int32_t>(), wte.data_as<T>(), wte.dim(0), vocab_start,
        wpe.defined() ? wpe.data_as<T>() : nullptr, n, s, c);
  });
  CUDA_CHECK(cudaGetLastError());
}

// Deterministic: positions are stably sorted by local row, then each held row's gradients are
// summed in position order into its dwte row; dwpe may be undefined.
void embedding_backward_cuda(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t vocab_start, Workspace& ws, cudaStream_t stream) {
  const int64_t b = tokens.dim(0), s = tokens.dim(1), n = tokens.numel(), c = dwte.dim(1);
  const int64_t rows = dwte.dim(0);
  if (n == 0 || c == 0) return;
  MTNLG_CHECK_MSG(n < (int64_t{1} << 31) && rows < (int64_t{1} << 30),
                  "embedding_backward: " << n << " tokens, " << rows << " rows");
  const int num = static_cast<int>(n);
  const int end_bit = bits_for(rows + 1);  // the local rows and the "not held" key
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), num, 0, end_bit,
      stream));
  const size_t ints = (4 * static_cast<size_t>(n) + 63) / 64 * 64;
  char* scratch = static_cast<char*>(ws.get(ints * sizeof(int32_t) + sort_bytes));
  int32_t* ids_in = reinterpret_cast<int32_t*>(scratch);
  int32_t* pos_in = ids_in + n;
  int32_t* ids_out = pos_in + n;
  int32_t* pos_out = ids_out + n;
  void* sort_tmp = scratch + ints * sizeof(int32_t);
  local_rows_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(
      ids_in, pos_in, tokens.data_as<int32_t>(), rows, vocab_start, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, ids_in, ids_out, pos_in, pos_out,
                                             num, 0, end_bit, stream));
  dispatch_dtype(Device::kCUDA, dout.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const dim3 grid(static_cast<unsigned>(n),
                    static_cast<unsigned>((c + kCudaBlock - 1) / kCudaBlock));
    embedding_wte_backward_kernel<<<grid, kCudaBlock, 0, stream>>>(
        dwte.data_as<A>(), dout.data_as<T>(), ids_out, pos_out, rows, n, c);
    CUDA_CHECK(cudaGetLastError());
    if (!dwpe.defined()) return;
    embedding_wpe_backward_kernel<<<cuda_grid(s * c), kCudaBlock, 0, stream>>>(
        dwpe.data_as<A>(), dout.data_as<T>(), b, s, c);
    CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                                       const Tensor& wpe) {
  const char* op = "embedding_forward";
  check_ids(tokens, wte.dim(0), op, "token id", kVocabFix);
  embedding_forward_cuda(out, tokens, wte, wpe, 0, stream());
}

void CudaBackend::do_embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                                        const Tensor& tokens) {
  const char* op = "embedding_backward";
  check_ids(tokens, dwte.dim(0), op, "token id", kVocabFix);
  embedding_backward_cuda(dwte, dwpe, dout, tokens, 0, ws_, stream());
}

void CudaBackend::do_embedding_shard_forward(Tensor& out, const Tensor& tokens,
                                             const Tensor& wte_local, const Tensor& wpe,
                                             int64_t vocab_start) {
  embedding_forward_cuda(out, tokens, wte_local, wpe, vocab_start, stream());
}

void CudaBackend::do_embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                              const Tensor& tokens, int64_t vocab_start) {
  embedding_backward_cuda(dwte_local, dwpe, dout, tokens, vocab_start, ws_, stream());
}

}  // namespace mtnlg
