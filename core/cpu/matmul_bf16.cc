#include "core/cpu/matmul_bf16.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <list>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/cpu/kernels_cpu.h"
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
  // A weight's blocked copy, made from the plain operand (src, k, n, ld_b, trans_b).
  struct WeightCopy {
    const void* src;
    int64_t k, n, ld_b;
    bool trans_b;
    dnnl::memory::desc desc;
    Tensor storage;
    dnnl::memory mem;
    bool fresh;  // holds the weight's values of this window
    bool used;   // used since the last end_weights_window()
  };

  Impl(Allocator a, bool onednn_wanted)
      : alloc(std::move(a)), onednn(onednn_wanted && MatmulBf16::onednn_available()) {
    if (!alloc) alloc = [](int64_t bytes) { return Tensor::cpu({(bytes + 1) / 2}, DType::kBF16); };
  }

  Allocator alloc;
  bool onednn;  // else the fp32 fallback
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
      Tensor storage = alloc(bytes);
      MTNLG_CHECK_MSG(static_cast<int64_t>(storage.nbytes()) >= bytes,
                      "weight copy allocator gave " << storage.nbytes() << " bytes for " << bytes);
      dnnl::memory mem(desc, engine, storage.data());
      weights.push_back(WeightCopy{g.b, g.k, g.n, g.ld_b, g.trans_b, desc, std::move(storage), mem,
                                   false, false});
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
};

MatmulBf16::MatmulBf16(Allocator alloc, bool use_onednn)
    : impl_(std::make_unique<Impl>(std::move(alloc), use_onednn)) {}

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
  for (const auto& w : impl_->weights) bytes += static_cast<int64_t>(w.desc.get_size());
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
  if (!onednn_available()) return 0;
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

namespace {

// rows x cols of bf16 bits, rows ld apart, widened into a dense fp32 matrix.
void widen_rows(std::vector<float>& out, const uint16_t* x, int64_t rows, int64_t cols,
                int64_t ld) {
  out.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] = bf16_to_f32(x[r * ld + c]);
}

// The product through the fp32 GEMM, one problem at a time.
void fp32_fallback(const Bf16Gemm& g) {
  std::vector<float> a, b, c;
  for (int64_t i = 0; i < g.batch; ++i) {
    widen_rows(a, g.a + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.ld_a);
    widen_rows(b, g.b + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ld_b);
    c.assign(static_cast<size_t>(g.m * g.n), 0.0f);
    auto* c_f32 = static_cast<float*>(g.c) + i * g.stride_c;
    auto* c_b16 = static_cast<uint16_t*>(g.c) + i * g.stride_c;
    if (g.beta != 0.0f)
      for (int64_t r = 0; r < g.m; ++r)
        for (int64_t j = 0; j < g.n; ++j)
          c[static_cast<size_t>(r * g.n + j)] =
              g.c_bf16 ? bf16_to_f32(c_b16[r * g.ld_c + j]) : c_f32[r * g.ld_c + j];
    gemm(c.data(), a.data(), g.trans_a, b.data(), g.trans_b, g.m, g.n, g.k, g.alpha, g.beta);
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t j = 0; j < g.n; ++j) {
        const float v = c[static_cast<size_t>(r * g.n + j)];
        if (g.c_bf16) {
          c_b16[r * g.ld_c + j] = f32_to_bf16(v);
        } else {
          c_f32[r * g.ld_c + j] = v;
        }
      }
  }
}

}  // namespace

void MatmulBf16::execute(const Bf16Gemm& g, bool weight) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  MTNLG_CHECK_MSG(g.k > 0, "bf16 gemm with k = 0");
  MTNLG_CHECK_MSG(
      g.ld_a >= (g.trans_a ? g.m : g.k) && g.ld_b >= (g.trans_b ? g.k : g.n) && g.ld_c >= g.n,
      "bf16 gemm " << g.m << "x" << g.n << "x" << g.k << ": a leading dimension is "
                   << "shorter than its row");
  if (!impl_->onednn) {
    fp32_fallback(g);
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
