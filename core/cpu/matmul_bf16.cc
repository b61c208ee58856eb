#include "core/cpu/matmul_bf16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>

#include "core/status.h"

namespace mtnlg::cpu {

struct MatmulBf16::Impl {
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, float, float>;
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  mutable std::mutex mu;
  std::map<Key, Entry> cache;  // guarded by mu; entries are never erased, so references stay

  const Entry& get(const Key& key) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const auto [m, n, k, ta, tb, c_bf16, alpha, beta] = key;
    using dt = dnnl::memory::data_type;
    // Row-major storage; a transposed operand is described by its strides, not copied.
    const dnnl::memory::desc a_md({m, k}, dt::bf16,
                                  ta ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1});
    const dnnl::memory::desc b_md({k, n}, dt::bf16,
                                  tb ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
    const dnnl::memory::desc c_md({m, n}, c_bf16 ? dt::bf16 : dt::f32, dnnl::memory::dims{n, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
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
  if (m <= 0 || n <= 0) return;
  MTNLG_CHECK_MSG(k > 0, "bf16 gemm with k = 0");
  try {
    const Impl::Entry& e = impl_->get({m, n, k, trans_a, trans_b, c_bf16, alpha, beta});
    // oneDNN takes non-const handles; it only reads the sources.
    dnnl::memory a_mem(e.pd.src_desc(), impl_->engine, const_cast<uint16_t*>(a));
    dnnl::memory b_mem(e.pd.weights_desc(), impl_->engine, const_cast<uint16_t*>(b));
    dnnl::memory c_mem(e.pd.dst_desc(), impl_->engine, c);
    dnnl::stream stream(impl_->engine);
    e.prim.execute(stream,
                   {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& err) {
    MTNLG_CHECK_MSG(false,
                    "oneDNN bf16 matmul " << m << "x" << n << "x" << k << ": " << err.what());
  }
}

}  // namespace mtnlg::cpu
