#include "core/cpu/matmul_bf16.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "core/cpu/kernels_cpu.h"
#include "core/cpu/openblas_sgemm.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"

namespace mtnlg::cpu {

namespace {

// One dense row-major product's description (no pointers): leading dimensions are the rows' widths.
Bf16Gemm dense_gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, bool c_bf16) {
  Bf16Gemm g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.ld_a = trans_a ? m : k;
  g.trans_a = trans_a;
  g.ld_b = trans_b ? k : n;
  g.trans_b = trans_b;
  g.ld_c = n;
  g.c_bf16 = c_bf16;
  return g;
}

// rows x cols of bf16 bits, rows ld apart, widened into dense fp32 rows (bf16 -> fp32 is a shift:
// one vectorised pass per row). The rows are split over the threads when the matrix is large
// and the caller is not already in a parallel region.
void widen_matrix(float* out, const uint16_t* x, int64_t rows, int64_t cols, int64_t ld) {
  const auto* src = reinterpret_cast<const Bf16*>(x);
#pragma omp parallel for schedule(static) if (rows * cols >= kElemBlock && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) widen(out + r * cols, src + r * ld, cols);
}

// Problem i of a batch, as a batch of one.
Bf16Gemm problem(const Bf16Gemm& g, int64_t i) {
  Bf16Gemm one = g;
  one.batch = 1;
  one.a = g.a + i * g.stride_a;
  one.b = g.b + i * g.stride_b;
  one.c = g.c_bf16 ? static_cast<void*>(static_cast<uint16_t*>(g.c) + i * g.stride_c)
                   : static_cast<void*>(static_cast<float*>(g.c) + i * g.stride_c);
  return one;
}

// The reverse for an m x n result: dense fp32 rows into c (fp32 or bf16 bits, rows ld_c apart).
void store_rows(void* c, bool c_bf16, int64_t ld_c, const float* in, int64_t m, int64_t n) {
#pragma omp parallel for schedule(static) if (m * n >= kElemBlock && !omp_in_parallel())
  for (int64_t r = 0; r < m; ++r) {
    if (c_bf16) {
      narrow(reinterpret_cast<Bf16*>(c) + r * ld_c, in + r * n, n);
    } else {
      std::memcpy(static_cast<float*>(c) + r * ld_c, in + r * n, static_cast<size_t>(n) * 4);
    }
  }
}

// c's m x n values (fp32 or bf16 bits, rows ld_c apart) as dense fp32 rows, for beta != 0.
void load_rows(float* out, const void* c, bool c_bf16, int64_t ld_c, int64_t m, int64_t n) {
  if (c_bf16) {
    widen_matrix(out, static_cast<const uint16_t*>(c), m, n, ld_c);
    return;
  }
#pragma omp parallel for schedule(static) if (m * n >= kElemBlock && !omp_in_parallel())
  for (int64_t r = 0; r < m; ++r)
    std::memcpy(out + r * n, static_cast<const float*>(c) + r * ld_c, static_cast<size_t>(n) * 4);
}

// ---- The fp32 fallback (oneDNN without a bf16 matmul on this CPU) ----
//
// The product through the fp32 GEMM on widened operands: the same products (exact in fp32),
// summed in fp32. Widening a large operand whole and writing a large bf16 result through a
// whole fp32 scratch costs memory traffic the fp32 GEMM does not have (GPT-2's head: 200 MB
// each way), so the output is cut into panels along its longer side, and each panel widens
// just its slice of the operand it splits and writes its slice of c; where k is long (the
// head's input gradient, k = the vocabulary) a panel also walks k in fixed chunks, adding each
// chunk's product into c. A panel's buffers stay in the core's cache.
//
// Determinism: each output element is one k-ordered sum whatever rows or columns share its GEMM
// call, so panels follow the thread count as the fp32 GEMM's pieces do (and, as there, OpenBLAS
// may pick another kernel for a small panel: bit-reproducible at a given thread count,
// gemm_cpu.cc); the k chunks change the sums, and are fixed by the shape alone.

// Bytes a panel's widened slice and fp32 output may take, the fewest rows (or columns) a panel is
// worth a GEMM call for, and the k chunk of long sums (k past 4 chunks), with its panels' larger
// budget. Each panel's GEMM call packs the operand it does not split anew, so panels trade that
// packing against the output block's cache residence: 4 MB panels made a GPT-2 124M iteration
// 3-4% faster than 1 MB ones (an L2's worth) on an AVX2 EPYC, and 32 MB ones (most products one
// panel a thread, the head's 50,304 columns in 18) about 10% faster than 4 MB ones
// (docs/bf16-without-avx512.md, 2026-11-28). The panels' buffers are each thread's own scratch
// (kept for the next call, outside the memory plan), so the threads share kPanelTotalBytes,
// each between kPanelMinBytes and kPanelMaxBytes: 32 MB a thread on 1-2 cores (measured on 2), the
// 4 MB panels from 16 threads up.
constexpr int64_t kPanelMinBytes = int64_t{4} << 20;
constexpr int64_t kPanelMaxBytes = int64_t{32} << 20;
constexpr int64_t kPanelTotalBytes = int64_t{64} << 20;
constexpr int64_t kMinPanel = 64;
constexpr int64_t kChunkK = 512;
constexpr int64_t kChunkedPanelBytes = int64_t{8} << 20;

// An fp32 matrix for gemm_serial: the data and its leading dimension.
struct F32Slice {
  const float* p;
  int64_t ld;
};

// op(a)[i0:i1, k0:k1]: from a32 (the stored a widened whole, dense) by offset, or widened into
// buf.
F32Slice slice_a(const Bf16Gemm& g, const float* a32, float* buf, int64_t i0, int64_t i1,
                 int64_t k0, int64_t k1) {
  if (!g.trans_a) {  // stored [m, k]
    if (a32 != nullptr) return {a32 + i0 * g.k + k0, g.k};
    widen_matrix(buf, g.a + i0 * g.ld_a + k0, i1 - i0, k1 - k0, g.ld_a);
    return {buf, k1 - k0};
  }
  if (a32 != nullptr) return {a32 + k0 * g.m + i0, g.m};  // stored [k, m]
  widen_matrix(buf, g.a + k0 * g.ld_a + i0, k1 - k0, i1 - i0, g.ld_a);
  return {buf, i1 - i0};
}

// op(b)[k0:k1, j0:j1], likewise.
F32Slice slice_b(const Bf16Gemm& g, const float* b32, float* buf, int64_t j0, int64_t j1,
                 int64_t k0, int64_t k1) {
  if (g.trans_b) {  // stored [n, k]
    if (b32 != nullptr) return {b32 + j0 * g.k + k0, g.k};
    widen_matrix(buf, g.b + j0 * g.ld_b + k0, j1 - j0, k1 - k0, g.ld_b);
    return {buf, k1 - k0};
  }
  if (b32 != nullptr) return {b32 + k0 * g.n + j0, g.n};  // stored [k, n]
  widen_matrix(buf, g.b + k0 * g.ld_b + j0, k1 - k0, j1 - j0, g.ld_b);
  return {buf, j1 - j0};
}

// c[i0:i1, j0:j1] = alpha * op(a)[i0:i1, :] op(b)[:, j0:j1] + beta * c on this thread, k taken
// in chunks of kc: a split (i) side widens its slice of a (b for j) per chunk into the thread's
// scratch unless given whole. An fp32 c is written directly, a bf16 c through an fp32 block.
void product_block(const Bf16Gemm& g, const float* a32, const float* b32, int64_t i0, int64_t i1,
                   int64_t j0, int64_t j1, int64_t kc) {
  const int64_t rows = i1 - i0, cols = j1 - j0;
  std::optional<ScratchSlot> a_buf, b_buf, acc;
  if (a32 == nullptr) a_buf.emplace(rows * kc);
  if (b32 == nullptr) b_buf.emplace(kc * cols);
  float* c = nullptr;
  int64_t ld_c = g.ld_c;
  uint16_t* c_bf16 = static_cast<uint16_t*>(g.c) + i0 * g.ld_c + j0;
  if (g.c_bf16) {
    acc.emplace(rows * cols);
    c = acc->data();
    ld_c = cols;
    if (g.beta != 0.0f) load_rows(c, c_bf16, true, g.ld_c, rows, cols);
  } else {
    c = static_cast<float*>(g.c) + i0 * g.ld_c + j0;
  }
  for (int64_t k0 = 0; k0 < g.k; k0 += kc) {
    const int64_t k1 = std::min(g.k, k0 + kc);
    const F32Slice a = slice_a(g, a32, a_buf ? a_buf->data() : nullptr, i0, i1, k0, k1);
    const F32Slice b = slice_b(g, b32, b_buf ? b_buf->data() : nullptr, j0, j1, k0, k1);
    gemm_serial(c, ld_c, a.p, a.ld, g.trans_a, b.p, b.ld, g.trans_b, rows, cols, k1 - k0, g.alpha,
                k0 == 0 ? g.beta : 1.0f);
  }
  if (g.c_bf16) store_rows(c_bf16, true, g.ld_c, c, rows, cols);
}

// How a batch-1 product's output is cut into panels (fallback_one, packed_fallback): along c's
// longer side, as few panels as fit a budget, their count a multiple of the threads (panels of
// equal work) unless the call runs on one thread, each a multiple of 16 wide (a full AVX-512
// float vector).
struct PanelCut {
  bool split_rows;     // panels of c's rows (a's slices) or of its columns (b's)
  int64_t len, other;  // c's length along the cut and across it
  int threads;
  bool serial;  // one thread: one core, inside a parallel region, or too small to share
};

PanelCut panel_cut(const Bf16Gemm& g) {
  PanelCut cut{};
  cut.split_rows = g.m >= g.n;
  cut.len = cut.split_rows ? g.m : g.n;
  cut.other = cut.split_rows ? g.n : g.m;
  cut.threads = omp_get_max_threads();
  cut.serial = cut.threads <= 1 || omp_in_parallel() || g.m * g.n * g.k < (int64_t{1} << 18);
  return cut;
}

// Each thread's share of kPanelTotalBytes, within [kPanelMinBytes, kPanelMaxBytes].
int64_t thread_panel_budget(int threads) {
  return std::clamp(kPanelTotalBytes / std::max(threads, 1), kPanelMinBytes, kPanelMaxBytes);
}

// The fewest panels of at most `budget` bytes at `per_unit` bytes a row (or column).
int64_t panel_count(const PanelCut& cut, int64_t per_unit, int64_t budget) {
  const int64_t count = std::max<int64_t>(1, (cut.len * per_unit + budget - 1) / budget);
  return cut.serial ? count : (count + cut.threads - 1) / cut.threads * cut.threads;
}

// The width of each of `count` panels over `len`, in 16s.
int64_t panel_width(int64_t len, int64_t count) {
  return (len + count * 16 - 1) / (count * 16) * 16;
}

// block(i0, i1, j0, j1) for each panel of c, over the threads when `parallel`.
template <class Block>
void for_each_panel(const PanelCut& cut, int64_t panel, bool parallel, const Block& block) {
  const int64_t panels = (cut.len + panel - 1) / panel;
#pragma omp parallel for schedule(static) if (parallel && panels > 1)
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t lo = p * panel, hi = std::min(cut.len, lo + panel);
    if (cut.split_rows) {
      block(lo, hi, int64_t{0}, cut.other);
    } else {
      block(int64_t{0}, cut.other, lo, hi);
    }
  }
}

// One problem (batch 1). b32, when given, is b widened whole (a weight's copy).
void fallback_one(const Bf16Gemm& g, const float* b32) {
  const PanelCut cut = panel_cut(g);
  const int64_t kc = g.k > 4 * kChunkK ? kChunkK : g.k;
  const bool chunked = kc < g.k;
  const int64_t per_unit = 4 * (kc + (g.c_bf16 ? cut.other : 0));  // bytes a row/column of a panel
  const int64_t count =
      panel_count(cut, per_unit, chunked ? kChunkedPanelBytes : thread_panel_budget(cut.threads));
  int64_t panel = panel_width(cut.len, count);
  const bool sliced = chunked || (count > 1 && panel >= kMinPanel);
  // Not sliced: the threads' shares, as gemm() splits.
  if (!sliced) panel = panel_width(cut.len, cut.serial ? 1 : cut.threads);
  // The operand that is not split, and when not sliced the split one, widened whole.
  std::optional<ScratchSlot> a_whole, b_whole;
  const float* a32 = nullptr;
  if (!cut.split_rows || !sliced) {
    a_whole.emplace(g.m * g.k);
    a32 = a_whole->data();
    widen_matrix(a_whole->data(), g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.ld_a);
  }
  if (b32 == nullptr && (cut.split_rows || !sliced)) {
    b_whole.emplace(g.k * g.n);
    b32 = b_whole->data();
    widen_matrix(b_whole->data(), g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ld_b);
  }
  for_each_panel(cut, panel, !omp_in_parallel(),
                 [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
                   product_block(g, a32, b32, i0, i1, j0, j1, kc);
                 });
}

// Where oneDNN has no bf16 matmul. A batch (attention's small products): the problems split
// over the threads, each widened and multiplied on its thread.
void fp32_fallback(const Bf16Gemm& g, const float* b32) {
  if (g.batch == 1) {
    fallback_one(g, b32);
    return;
  }
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t i = 0; i < g.batch; ++i) {
    product_block(problem(g, i), nullptr, nullptr, 0, g.m, 0, g.n, g.k);
  }
}

// ---- OpenBLAS's fp32 kernel on bf16 packing (core/cpu/openblas_sgemm.h) ----
//
// No widened operand and no k chunks: the packing reads bf16, and each element's sum is the
// kernel's over all of k in the k blocks k alone fixes. A bf16 c still goes through an fp32 block
// (the kernel adds into fp32), so a long bf16 output is cut into panels as above, each taking
// only its output block's budget; an fp32 c is written in place, one panel a thread.

// c[i0:i1, j0:j1] on this thread.
void packed_block(const Bf16Gemm& g, const OpenblasSgemm& s, int64_t i0, int64_t i1, int64_t j0,
                  int64_t j1) {
  const int64_t rows = i1 - i0, cols = j1 - j0;
  const uint16_t* a = g.trans_a ? g.a + i0 : g.a + i0 * g.ld_a;
  const uint16_t* b = g.trans_b ? g.b + j0 * g.ld_b : g.b + j0;
  if (!g.c_bf16) {
    s.gemm(static_cast<float*>(g.c) + i0 * g.ld_c + j0, g.ld_c, a, g.ld_a, g.trans_a, b, g.ld_b,
           g.trans_b, rows, cols, g.k, g.alpha, g.beta);
    return;
  }
  ScratchSlot acc(rows * cols);
  uint16_t* c = static_cast<uint16_t*>(g.c) + i0 * g.ld_c + j0;
  if (g.beta != 0.0f) load_rows(acc.data(), c, true, g.ld_c, rows, cols);
  s.gemm(acc.data(), cols, a, g.ld_a, g.trans_a, b, g.ld_b, g.trans_b, rows, cols, g.k, g.alpha,
         g.beta);
  store_rows(c, true, g.ld_c, acc.data(), rows, cols);
}

void packed_fallback(const Bf16Gemm& g, const OpenblasSgemm& s) {
  if (g.batch > 1) {
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int64_t i = 0; i < g.batch; ++i) {
      packed_block(problem(g, i), s, 0, g.m, 0, g.n);
    }
    return;
  }
  const PanelCut cut = panel_cut(g);
  const int64_t per_unit = g.c_bf16 ? 4 * cut.other : 0;  // bytes of fp32 block a row/column
  const int64_t panel =
      panel_width(cut.len, panel_count(cut, per_unit, thread_panel_budget(cut.threads)));
  for_each_panel(cut, panel, !cut.serial, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    packed_block(g, s, i0, i1, j0, j1);
  });
}

// oneDNN's name for an instruction set, as its ONEDNN_MAX_CPU_ISA values spell them.
std::string isa_name(dnnl::cpu_isa isa) {
  using I = dnnl::cpu_isa;
  switch (isa) {
    case I::sse41:
      return "SSE4.1";
    case I::avx:
      return "AVX";
    case I::avx2:
      return "AVX2";
    case I::avx2_vnni:
      return "AVX2_VNNI";
    case I::avx512_core:
      return "AVX512_CORE";
    case I::avx512_core_vnni:
      return "AVX512_CORE_VNNI";
    case I::avx512_core_bf16:
      return "AVX512_CORE_BF16";
    case I::avx512_core_amx:
      return "AVX512_CORE_AMX";
    default:
      return "ISA " + std::to_string(static_cast<int>(isa));
  }
}

}  // namespace

struct MatmulBf16::Impl {
  // Everything a primitive depends on: sizes, leading dimensions and batch strides, transposes,
  // output dtype, alpha, beta, and whether b comes in the kernel's blocked layout (not the
  // pointers).
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t,
                         int64_t, bool, int64_t, int64_t, bool, float, float, bool>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  // A weight's copy, made from the plain operand (src, k, n, ld_b, trans_b): oneDNN's blocked
  // layout of it (desc, mem), or for the fp32 fallback the stored matrix widened to dense fp32
  // rows (desc empty). The fallback's copy does not depend on the transpose, so a linear layer's
  // forward (w^T) and input gradient (w) share it.
  struct WeightCopy {
    const void* src;
    int64_t k, n, ld_b;
    bool trans_b;
    dnnl::memory::desc desc;
    Tensor storage;
    dnnl::memory mem;
    int64_t bytes;
    bool fresh;  // holds the weight's values of this window
    bool used;   // used since the last end_weights_window()
    bool same_matrix(const Bf16Gemm& g) const {
      // The stored matrix: rows x cols, rows ld_b apart.
      const auto rows = [](int64_t k_, int64_t n_, bool t) { return t ? n_ : k_; };
      return src == g.b && ld_b == g.ld_b && rows(k, n, trans_b) == rows(g.k, g.n, g.trans_b) &&
             rows(n, k, trans_b) == rows(g.n, g.k, g.trans_b);
    }
  };

  Impl(Allocator a, bool onednn_wanted, bool kernel_wanted)
      : alloc(std::move(a)),
        onednn(onednn_wanted && MatmulBf16::onednn_available()),
        kernel(!OpenblasSgemm::disabled_by_env() && !onednn && kernel_wanted &&
               OpenblasSgemm::get().available()) {
    if (!alloc) alloc = [](int64_t bytes) { return Tensor::cpu({(bytes + 1) / 2}, DType::kBF16); };
  }

  Allocator alloc;
  bool onednn;  // else the fp32 fallback
  bool kernel;  // the fallback through OpenBLAS's kernel on bf16 packing (else widening)
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  mutable std::mutex mu;
  std::map<Key, Entry> cache;     // guarded by mu; entries are never erased, so references stay
  std::list<WeightCopy> weights;  // guarded by mu; a list, so references stay until dropped

  static Key key_of(const Bf16Gemm& g, bool b_blocked) {
    return {g.batch,    g.m,       g.n,    g.k,        g.ld_a,   g.stride_a, g.trans_a, g.ld_b,
            g.stride_b, g.trans_b, g.ld_c, g.stride_c, g.c_bf16, g.alpha,    g.beta,    b_blocked};
  }

  // A row-major operand's descriptor; a transposed one is described by its strides, not copied.
  // One product is 2-D (the batched form picks other, slower kernels in oneDNN 2.6).
  static dnnl::memory::desc operand(int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                                    int64_t stride, bool trans, dnnl::memory::data_type dt) {
    const dnnl::memory::dims row_col =
        trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
    if (batch == 1) return dnnl::memory::desc({rows, cols}, dt, row_col);
    return dnnl::memory::desc({batch, rows, cols}, dt, {stride, row_col[0], row_col[1]});
  }

  static dnnl::matmul::primitive_desc make_pd(const Bf16Gemm& g, bool b_blocked,
                                              const dnnl::engine& engine) {
    using dt = dnnl::memory::data_type;
    const auto a_md = operand(g.batch, g.m, g.k, g.ld_a, g.stride_a, g.trans_a, dt::bf16);
    const auto b_md = b_blocked
                          ? dnnl::memory::desc({g.k, g.n}, dt::bf16, dnnl::memory::format_tag::any)
                          : operand(g.batch, g.k, g.n, g.ld_b, g.stride_b, g.trans_b, dt::bf16);
    const auto c_md =
        operand(g.batch, g.m, g.n, g.ld_c, g.stride_c, false, g.c_bf16 ? dt::bf16 : dt::f32);
    dnnl::primitive_attr attr;
    if (g.alpha != 1.0f) attr.set_output_scales(0, {g.alpha});
    if (g.beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(g.beta);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
  }

  const Entry& get(const Bf16Gemm& g, bool b_blocked) {
    const Key key = key_of(g, b_blocked);
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const auto pd = make_pd(g, b_blocked, engine);
    Entry entry{pd, dnnl::matmul(pd)};
    return cache.emplace(key, std::move(entry)).first->second;
  }

  // g.b in the layout `desc`: its copy, reordered on its first use since the last
  // end_weights_window(), into the memory it had before when it had one.
  const dnnl::memory& weight(const Bf16Gemm& g, const dnnl::memory::desc& desc) {
    std::lock_guard<std::mutex> lock(mu);
    WeightCopy* copy = nullptr;
    for (WeightCopy& w : weights)
      if (w.src == g.b && w.k == g.k && w.n == g.n && w.ld_b == g.ld_b && w.trans_b == g.trans_b &&
          w.desc == desc)
        copy = &w;
    if (copy == nullptr) {
      const auto bytes = static_cast<int64_t>(desc.get_size());
      Tensor storage = allocate(bytes);
      dnnl::memory mem(desc, engine, storage.data());
      weights.push_back(WeightCopy{g.b, g.k, g.n, g.ld_b, g.trans_b, desc, std::move(storage), mem,
                                   bytes, false, false});
      copy = &weights.back();
    }
    copy->used = true;
    if (!copy->fresh) {
      dnnl::memory src(operand(1, g.k, g.n, g.ld_b, 0, g.trans_b, dnnl::memory::data_type::bf16),
                       engine, const_cast<uint16_t*>(g.b));
      dnnl::stream stream(engine);
      dnnl::reorder(src, copy->mem).execute(stream, src, copy->mem);
      stream.wait();
      copy->fresh = true;
    }
    return copy->mem;
  }

  // The fallback's copy of g.b: the stored matrix in dense fp32 rows, widened on its first use
  // since the last end_weights_window().
  const float* weight_f32(const Bf16Gemm& g) {
    std::lock_guard<std::mutex> lock(mu);
    WeightCopy* copy = nullptr;
    for (WeightCopy& w : weights)
      if (w.desc.is_zero() && w.same_matrix(g)) copy = &w;
    const int64_t rows = g.trans_b ? g.n : g.k, cols = g.trans_b ? g.k : g.n;
    if (copy == nullptr) {
      const int64_t bytes = rows * cols * static_cast<int64_t>(sizeof(float));
      weights.push_back(WeightCopy{
          g.b, g.k, g.n, g.ld_b, g.trans_b, {}, allocate(bytes), {}, bytes, false, false});
      copy = &weights.back();
    }
    copy->used = true;
    auto* f32 = static_cast<float*>(copy->storage.data());
    if (!copy->fresh) {
      widen_matrix(f32, g.b, rows, cols, g.ld_b);
      copy->fresh = true;
    }
    return f32;
  }

  Tensor allocate(int64_t bytes) {
    Tensor storage = alloc(bytes);
    MTNLG_CHECK_MSG(static_cast<int64_t>(storage.nbytes()) >= bytes,
                    "weight copy allocator gave " << storage.nbytes() << " bytes for " << bytes);
    return storage;
  }
};

MatmulBf16::MatmulBf16(Allocator alloc, bool use_onednn, bool use_openblas_kernel)
    : impl_(std::make_unique<Impl>(std::move(alloc), use_onednn, use_openblas_kernel)) {}

bool MatmulBf16::openblas_kernel_default() {
  // The variable is read first, so that a misspelt value is an error on every CPU.
  return !OpenblasSgemm::disabled_by_env() && !onednn_available() &&
         OpenblasSgemm::get().available();
}

bool MatmulBf16::uses_openblas_kernel() const {
  return impl_->kernel;
}

bool MatmulBf16::onednn_available() {
  // Asked once: a small bf16 primitive either can be made on this CPU or not.
  static const bool available = [] {
    try {
      const Bf16Gemm g = dense_gemm(16, 16, 16, false, false, false);
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      Impl::make_pd(g, false, engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

bool MatmulBf16::uses_onednn() const {
  return impl_->onednn;
}
MatmulBf16::~MatmulBf16() = default;

void MatmulBf16::end_weights_window() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->weights.remove_if([](const Impl::WeightCopy& w) { return !w.used; });
  for (auto& w : impl_->weights) w.fresh = w.used = false;
}

int64_t MatmulBf16::weight_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int64_t bytes = 0;
  for (const auto& w : impl_->weights) bytes += w.bytes;
  return bytes;
}

bool MatmulBf16::holds_weight(const void* begin, const void* end) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto* lo = static_cast<const char*>(begin);
  const auto* hi = static_cast<const char*>(end);
  for (const auto& w : impl_->weights) {
    if (!w.fresh) continue;  // remade from the weight's values at its next use
    // The plain operand spans its rows' leading dimensions: (rows - 1) * ld + cols elements.
    const int64_t rows = w.trans_b ? w.n : w.k, cols = w.trans_b ? w.k : w.n;
    const auto* src = static_cast<const char*>(w.src);
    const char* src_end = src + ((rows - 1) * w.ld_b + cols) * 2;
    if (src < hi && lo < src_end) return true;
  }
  return false;
}

int64_t MatmulBf16::weight_copy_bytes(int64_t m, int64_t n, int64_t k, bool trans_b, bool c_bf16,
                                      int threads) {
  const bool widen = OpenblasSgemm::disabled_by_env();  // read on every CPU: a misspelling fails
  if (!onednn_available())
    return !widen && OpenblasSgemm::get().available() ? 0
                                                      : n * k * static_cast<int64_t>(sizeof(float));
  const Bf16Gemm g = dense_gemm(m, n, k, false, trans_b, c_bf16);
  // oneDNN reads the thread count when it creates the primitive: the run's, then the caller's
  // back (the setting is per calling thread).
  struct Threads {
    int before = omp_get_max_threads();
    explicit Threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }
    ~Threads() { omp_set_num_threads(before); }
  } run_threads(threads);
  try {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return static_cast<int64_t>(Impl::make_pd(g, true, engine).weights_desc().get_size());
  } catch (const dnnl::error& err) {
    MTNLG_CHECK_MSG(false,
                    "oneDNN bf16 matmul " << m << "x" << n << "x" << k << ": " << err.what());
  }
  return 0;
}

int64_t MatmulBf16::linear_weight_copy_bytes(int64_t rows, int64_t out, int64_t in, int threads) {
  if (!onednn_available()) return weight_copy_bytes(rows, out, in, true, true, threads);
  return weight_copy_bytes(rows, out, in, true, true, threads) +
         weight_copy_bytes(rows, in, out, false, true, threads);
}

std::string MatmulBf16::describe() {
  if (onednn_available())
    return "oneDNN " + isa_name(dnnl::get_effective_cpu_isa()) +
           " kernels (bf16 products, fp32 sums)";
  const std::string why = ": oneDNN " + std::to_string(dnnl::version()->major) + "." +
                          std::to_string(dnnl::version()->minor) +
                          " has no bf16 matmul on this CPU (" +
                          isa_name(dnnl::get_effective_cpu_isa()) + "; it needs AVX-512)";
  const OpenblasSgemm& kernel = OpenblasSgemm::get();
  if (openblas_kernel_default())
    return "OpenBLAS's fp32 GEMM kernel (" + kernel.describe() +
           ") on bf16 operands packed to fp32 as it reads them" + why;
  const std::string not_kernel = OpenblasSgemm::disabled_by_env()
                                     ? "MTNLG_BF16_FALLBACK=widen"
                                     : "not OpenBLAS's kernel: " + kernel.describe();
  return "the fp32 GEMM (OpenBLAS) on widened operands, weights widened once per step (" +
         not_kernel + ")" + why;
}

int64_t MatmulBf16::cached() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int64_t>(impl_->cache.size());
}

void MatmulBf16::run(void* c, bool c_bf16, const uint16_t* a, bool trans_a, const uint16_t* b,
                     bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                     bool b_weight) {
  Bf16Gemm g = dense_gemm(m, n, k, trans_a, trans_b, c_bf16);
  g.a = a;
  g.b = b;
  g.c = c;
  g.alpha = alpha;
  g.beta = beta;
  execute(g, b_weight);
}

void MatmulBf16::run(const Bf16Gemm& g) {
  execute(g, false);
}

void MatmulBf16::run_weight(const Bf16Gemm& g) {
  MTNLG_CHECK_MSG(g.batch == 1,
                  "bf16 gemm: a weight operand is one matrix, got a batch of " << g.batch);
  execute(g, true);
}

void MatmulBf16::execute(const Bf16Gemm& g, bool weight) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  MTNLG_CHECK_MSG(g.k > 0, "bf16 gemm with k = 0");
  MTNLG_CHECK_MSG(
      g.ld_a >= (g.trans_a ? g.m : g.k) && g.ld_b >= (g.trans_b ? g.k : g.n) && g.ld_c >= g.n,
      "bf16 gemm " << g.m << "x" << g.n << "x" << g.k << ": a leading dimension is "
                   << "shorter than its row");
  if (impl_->kernel) {  // reads the weight as it is: no copy to make
    packed_fallback(g, OpenblasSgemm::get());
    return;
  }
  if (!impl_->onednn) {
    fp32_fallback(g, weight ? impl_->weight_f32(g) : nullptr);
    return;
  }
  try {
    const Impl::Entry& e = impl_->get(g, weight);
    // oneDNN takes non-const handles; it only reads the sources.
    dnnl::memory a_mem(e.pd.src_desc(), impl_->engine, const_cast<uint16_t*>(g.a));
    dnnl::memory b_mem =
        weight ? impl_->weight(g, e.pd.weights_desc())
               : dnnl::memory(e.pd.weights_desc(), impl_->engine, const_cast<uint16_t*>(g.b));
    dnnl::memory c_mem(e.pd.dst_desc(), impl_->engine, g.c);
    dnnl::stream stream(impl_->engine);
    e.prim.execute(stream,
                   {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& err) {
    MTNLG_CHECK_MSG(false, "oneDNN bf16 matmul " << g.batch << " x " << g.m << "x" << g.n << "x"
                                                 << g.k << ": " << err.what());
  }
}

}  // namespace mtnlg::cpu
