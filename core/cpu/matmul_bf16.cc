#include "core/cpu/matmul_bf16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>

#include "core/status.h"

namespace mtnlg::cpu {

struct MatmulBf16::Impl {
  // Everything a primitive depends on: sizes, leading dimensions and batch strides, transposes,
  // output dtype, alpha, beta (not the pointers).
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t,
                         int64_t, bool, int64_t, int64_t, bool, float, float>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  mutable std::mutex mu;
  std::map<Key, Entry> cache;  // guarded by mu; entries are never erased, so references stay

  static Key key_of(const Bf16Gemm& g) {
    return {g.batch,    g.m,       g.n,    g.k,        g.ld_a,   g.stride_a, g.trans_a, g.ld_b,
            g.stride_b, g.trans_b, g.ld_c, g.stride_c, g.c_bf16, g.alpha,    g.beta};
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

  const Entry& get(const Bf16Gemm& g) {
    const Key key = key_of(g);
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    using dt = dnnl::memory::data_type;
    const auto a_md = operand(g.batch, g.m, g.k, g.ld_a, g.stride_a, g.trans_a, dt::bf16);
    const auto b_md = operand(g.batch, g.k, g.n, g.ld_b, g.stride_b, g.trans_b, dt::bf16);
    const auto c_md =
        operand(g.batch, g.m, g.n, g.ld_c, g.stride_c, false, g.c_bf16 ? dt::bf16 : dt::f32);
    dnnl::primitive_attr attr;
    if (g.alpha != 1.0f) attr.set_output_scales(0, {g.alpha});
    if (g.beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(g.beta);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    Entry entry{pd, dnnl::matmul(pd)};
    return cache.emplace(key, std::move(entry)).first->second;
  }
};

MatmulBf16::MatmulBf16() : impl_(std::make_unique<Impl>()) {}
MatmulBf16::~MatmulBf16() = default;

int64_t MatmulBf16::cached() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int64_t>(impl_->cache.size());
}

void MatmulBf16::run(void* c, bool c_bf16, const uint16_t* a, bool trans_a, const uint16_t* b,
                     bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  Bf16Gemm g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.ld_a = trans_a ? m : k;
  g.trans_a = trans_a;
  g.b = b;
  g.ld_b = trans_b ? k : n;
  g.trans_b = trans_b;
  g.c = c;
  g.ld_c = n;
  g.c_bf16 = c_bf16;
  g.alpha = alpha;
  g.beta = beta;
  run(g);
}

void MatmulBf16::run(const Bf16Gemm& g) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  MTNLG_CHECK_MSG(g.k > 0, "bf16 gemm with k = 0");
  MTNLG_CHECK_MSG(
      g.ld_a >= (g.trans_a ? g.m : g.k) && g.ld_b >= (g.trans_b ? g.k : g.n) && g.ld_c >= g.n,
      "bf16 gemm " << g.m << "x" << g.n << "x" << g.k << ": a leading dimension is "
                   << "shorter than its row");
  try {
    const Impl::Entry& e = impl_->get(g);
    // oneDNN takes non-const handles; it only reads the sources.
    dnnl::memory a_mem(e.pd.src_desc(), impl_->engine, const_cast<uint16_t*>(g.a));
    dnnl::memory b_mem(e.pd.weights_desc(), impl_->engine, const_cast<uint16_t*>(g.b));
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
