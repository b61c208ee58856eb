#include "core/cuda/cudnn_attention.h"

#include <cudnn_graph.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cudnn_library.h"
#include "core/cuda/kernels_cuda.h"
#include "core/status.h"

namespace mtnlg {
namespace {

using Dims = std::array<int64_t, 4>;

[[noreturn]] void fail(const CudnnLibrary& lib, cudnnStatus_t st, const std::string& what) {
  throw unsupported("cuDNN attention: " + what + ": " + lib.explain(st),
                    "MTNLG_CUDA_ATTENTION=cudnn");
}

// One backend descriptor, destroyed with this object.
class Desc {
 public:
  Desc(const CudnnLibrary& lib, cudnnBackendDescriptorType_t type, std::string what)
      : lib_(lib), what_(std::move(what)) {
    const cudnnStatus_t st = lib.create_descriptor(type, &d_);
    if (st != CUDNN_STATUS_SUCCESS) fail(lib, st, "creating " + what_);
  }
  ~Desc() {
    if (d_ != nullptr) lib_.destroy_descriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const void* values,
            int64_t count = 1) {
    const cudnnStatus_t st = lib_.set_attribute(d_, name, type, count, values);
    if (st != CUDNN_STATUS_SUCCESS)
      fail(lib_, st, what_ + ": attribute " + std::to_string(static_cast<int>(name)));
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t other) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &other);
  }
  // Returns the status instead of throwing where `may_fail` (an engine config that does not
  // take this graph).
  cudnnStatus_t finalize(bool may_fail = false) {
    const cudnnStatus_t st = lib_.finalize(d_);
    if (st != CUDNN_STATUS_SUCCESS && !may_fail) fail(lib_, st, "finalizing " + what_);
    return st;
  }

 private:
  const CudnnLibrary& lib_;
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

}  // namespace

// One graph's descriptors (all kept: the plan refers to them), its execution plan, and the ids
// its variant pack binds.
struct CudnnAttention::Plan {
  explicit Plan(const CudnnLibrary& l) : lib(l) {}
  const CudnnLibrary& lib;
  std::vector<std::unique_ptr<Desc>> descs;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t next_uid = 1;
  Desc* plan = nullptr;
  int64_t workspace_bytes = 0;
  // Tensors bound per call (0: absent) and the by-value scalars' host values.
  int64_t q = 0, k = 0, v = 0, o = 0, stats = 0, dout = 0, dq = 0, dk = 0, dv = 0;
  int64_t seed = 0, offset = 0, softmax_sum = 0, dq_accum = 0;
  int64_t softmax_sum_bytes = 0, dq_accum_bytes = 0;
  std::vector<std::pair<int64_t, const void*>> scalars;
  float scale = 1, neg_inf = -std::numeric_limits<float>::infinity(), one = 1;
  float dropout_scale = 1, dropout_keep = 1;

  Desc& make(cudnnBackendDescriptorType_t type, const std::string& what) {
    descs.push_back(std::make_unique<Desc>(lib, type, what));
    return *descs.back();
  }
  cudnnBackendDescriptor_t tensor(const Dims& dims, const Dims& strides, cudnnDataType_t type,
                                  bool is_virtual, int64_t* uid = nullptr, bool by_value = false) {
    Desc& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "a tensor");
    const int64_t id = next_uid++;
    const int64_t alignment = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &id)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    t.finalize();
    if (uid != nullptr) *uid = id;
    return t.get();
  }
  cudnnBackendDescriptor_t virt(const Dims& dims, const Dims& strides,
                                cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(dims, strides, type, true);
  }
  // A float scalar passed by value (the variant pack points at `value`, which outlives the plan).
  cudnnBackendDescriptor_t scalar(const float* value) {
    int64_t id = 0;
    auto t = tensor({1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, &id, true);
    scalars.emplace_back(id, value);
    return t;
  }
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t t = nullptr,
                 int64_t axis = -1, cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "a pointwise descriptor");
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &compute);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                    "pointwise operation " + std::to_string(static_cast<int>(mode)));
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get())
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    const float alpha = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &alpha)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &alpha);
    op.finalize();
    ops.push_back(op.get());
  }
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    Desc& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "a reduction descriptor");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    r.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "a reduction operation");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r.get());
    op.finalize();
    ops.push_back(op.get());
  }
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    Desc& m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "a matmul descriptor");
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
    m.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "a matmul operation");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m.get());
    op.finalize();
    ops.push_back(op.get());
  }
  void rng(double keep, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t seed_t,
           cudnnBackendDescriptor_t offset_t) {
    Desc& r = make(CUDNN_BACKEND_RNG_DESCRIPTOR, "an RNG descriptor");
    const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    r.set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, &dist)
        .set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, &keep);
    r.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, "an RNG operation");
    op.set_desc(CUDNN_ATTR_OPERATION_RNG_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_RNG_SEED, seed_t)
        .set_desc(CUDNN_ATTR_OPERATION_RNG_DESC, r.get())
        .set_desc(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset_t);
    op.finalize();
    ops.push_back(op.get());
  }
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "a reshape operation");
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize();
    ops.push_back(op.get());
  }
  // The causal mask on scores x [b, h, s, s]: y = row >= col ? x : -inf (the frontend's
  // top-left-aligned diagonal band with right bound 0).
  cudnnBackendDescriptor_t causal(cudnnBackendDescriptor_t x, const Dims& dims,
                                  const Dims& strides) {
    auto row = virt(dims, strides, CUDNN_DATA_INT32);
    auto col = virt(dims, strides, CUDNN_DATA_INT32);
    auto keep = virt(dims, strides, CUDNN_DATA_BOOLEAN);
    auto y = virt(dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, row, nullptr, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, col, nullptr, 3);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, nullptr, -1, CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, scalar(&neg_inf), y, keep);
    return y;
  }
  // The operation graph over `ops`, and the first engine configuration cuDNN's heuristics rank
  // that finalizes into an execution plan (mode A, then the fallback list).
  void build(cudnnHandle_t handle, const std::string& what) {
    Desc& graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what + ": the operation graph");
    graph
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(),
             static_cast<int64_t>(ops.size()))
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    graph.finalize();
    std::string tried;
    for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      Desc& heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what + ": engine heuristics");
      heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph.get())
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
      if (const cudnnStatus_t hst = heur.finalize(true); hst != CUDNN_STATUS_SUCCESS) {
        tried += " heuristics mode " + std::to_string(static_cast<int>(mode)) + " refused (" +
                 lib.explain(hst) + ");";
        continue;
      }
      int64_t count = 0;
      cudnnStatus_t st = lib.get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
      if (st != CUDNN_STATUS_SUCCESS) fail(lib, st, what + ": counting engine configs");
      std::vector<Desc*> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        cfgs.push_back(&make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, what + ": an engine config"));
        raw.push_back(cfgs.back()->get());
      }
      int64_t got = 0;
      st = lib.get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
      if (st != CUDNN_STATUS_SUCCESS) fail(lib, st, what + ": reading engine configs");
      for (int64_t i = 0; i < got; ++i) {
        Desc& p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what + ": an execution plan");
        p.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
            .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[static_cast<size_t>(i)]);
        const cudnnStatus_t fst = p.finalize(true);
        if (fst != CUDNN_STATUS_SUCCESS) {
          tried += " config " + std::to_string(i) + ": " + lib.explain(fst) + ";";
          continue;
        }
        int64_t n = 0;
        st = lib.get_attribute(p.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                               1, &n, &workspace_bytes);
        if (st != CUDNN_STATUS_SUCCESS) fail(lib, st, what + ": the plan's workspace size");
        plan = &p;
        return;
      }
      tried += " heuristics mode " + std::to_string(static_cast<int>(mode)) + ": " +
               std::to_string(got) + " configs;";
    }
    throw unsupported("cuDNN attention: no cuDNN engine runs " + what + " (" +
                          std::string(tried.empty() ? "none offered" : tried) +
                          "); choose other kernels (MTNLG_CUDA_ATTENTION=flash2 or blocked)",
                      "MTNLG_CUDA_ATTENTION=cudnn");
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream, bool deterministic, bool strict)
    : lib_(std::make_unique<CudnnLibrary>()),
      stream_(stream),
      deterministic_(deterministic),
      strict_(strict) {
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = lib_->create(&h);
  if (st != CUDNN_STATUS_SUCCESS) fail(*lib_, st, "cudnnCreate");
  handle_ = h;
  st = lib_->set_stream(h, stream);
  if (st != CUDNN_STATUS_SUCCESS) fail(*lib_, st, "cudnnSetStream");
  // The seed at byte 0 and the offset at byte 16: each on the 16-byte alignment its descriptor
  // states.
  CUDA_CHECK(cudaMalloc(&seed_offset_, 4 * sizeof(int64_t)));
  spdlog::info("attention through {}", describe());
}

CudnnAttention::~CudnnAttention() {
  plans_.clear();  // before the handle they were made with
  if (handle_ != nullptr) lib_->destroy(static_cast<cudnnHandle_t>(handle_));
  if (seed_offset_ != nullptr) cudaFree(seed_offset_);
}

std::unique_ptr<CudnnAttention> CudnnAttention::open(cudaStream_t stream, bool deterministic,
                                                     bool strict) {
  try {
    return std::make_unique<CudnnAttention>(stream, deterministic, strict);
  } catch (const Error& e) {
    if (strict || e.code() != Code::kUnsupported) throw;
    spdlog::warn(
        "attention: cuDNN's fused attention, the default, is not available ({}); the "
        "FA2-style kernels run where they apply, the blocked ones elsewhere",
        e.message());
    return nullptr;
  }
}

bool CudnnAttention::takes(int64_t b, int64_t s, int64_t heads, int64_t hd, DType dtype, double p) {
  const Key key{false, b, s, heads, hd, static_cast<int>(dtype), p};
  if (auto it = takes_.find(key); it != takes_.end()) return it->second;
  bool ok = true;
  try {
    plan(false, b, s, heads, hd, dtype, p);
    plan(true, b, s, heads, hd, dtype, p);
  } catch (const Error& e) {
    if (strict_ || e.code() != Code::kUnsupported) throw;
    spdlog::warn(
        "attention: cuDNN refuses [b {}, s {}, heads {}, head size {}] ({}); the "
        "FA2-style kernels run it where they apply, the blocked ones elsewhere",
        b, s, heads, hd, e.message());
    ok = false;
  }
  takes_.emplace(key, ok);
  return ok;
}

std::string CudnnAttention::describe() const {
  return lib_->describe() + (deterministic_ ? ", deterministic backward"
                                            : ", backward accumulating dQ (not bit-reproducible)");
}

CudnnAttention::Plan& CudnnAttention::plan(bool backward, int64_t b, int64_t s, int64_t h,
                                           int64_t d, DType dtype, double p) {
  const Key key{backward, b, s, h, d, static_cast<int>(dtype), p};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto g = std::make_unique<Plan>(*lib_);
  const cudnnDataType_t io = cudnn_type(dtype);
  // qkv [b, s, h, 3, d]: q, k, v of head j at columns (3j + 0, 1, 2) * d of a row.
  const Dims qkv_dims{b, h, s, d}, qkv_strides{s * h * 3 * d, 3 * d, h * 3 * d, 1};
  const Dims t_dims{b, h, d, s}, t_strides{s * h * 3 * d, 3 * d, 1, h * 3 * d};  // K^T, V^T
  const Dims o_strides{s * h * d, d, h * d, 1};                                  // out [b, s, h, d]
  const Dims row_dims{b, h, s, 1}, row_strides{h * s, s, 1, 1};
  const Dims sc_dims{b, h, s, s}, sc_strides{h * s * s, s * s, s, 1};
  const Dims sc_t_strides{h * s * s, s * s, 1, s};
  g->scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  g->dropout_scale = static_cast<float>(1.0 / (1.0 - p));
  g->dropout_keep = static_cast<float>(1.0 - p);
  const bool dropout = p > 0.0;
  cudnnBackendDescriptor_t mask = nullptr;
  const auto dropout_mask = [&] {
    auto seed_t = g->tensor({1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT64, false, &g->seed);
    auto offset_t = g->tensor({1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT64, false, &g->offset);
    mask = g->virt(sc_dims, sc_strides);
    g->rng(1.0 - p, mask, seed_t, offset_t);
  };
  const std::string what = std::string(backward ? "the backward" : "the forward") + " over [b " +
                           std::to_string(b) + ", s " + std::to_string(s) + ", heads " +
                           std::to_string(h) + ", head size " + std::to_string(d) + "] in " +
                           dtype_name(dtype) + (dropout ? ", dropout " + std::to_string(p) : "");
  if (!backward) {
    auto q = g->tensor(qkv_dims, qkv_strides, io, false, &g->q);
    auto kt = g->tensor(t_dims, t_strides, io, false, &g->k);
    auto v = g->tensor(qkv_dims, qkv_strides, io, false, &g->v);
    auto o = g->tensor(qkv_dims, o_strides, io, false, &g->o);
    auto stats = g->tensor(row_dims, row_strides, CUDNN_DATA_FLOAT, false, &g->stats);
    auto s1 = g->virt(sc_dims, sc_strides);
    g->matmul(q, kt, s1);
    auto s2 = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_MUL, s1, g->scalar(&g->scale), s2);
    auto s3 = g->causal(s2, sc_dims, sc_strides);
    // Softmax with its statistics: max, exp(x - max), sum, stats = max + log(sum), P = e / sum.
    auto mx = g->virt(row_dims, row_strides);
    g->reduction(CUDNN_REDUCE_TENSOR_MAX, s3, mx);
    auto sub = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_SUB, s3, mx, sub);
    auto ex = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_EXP, sub, nullptr, ex);
    auto sum = g->virt(row_dims, row_strides);
    g->reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    auto lg = g->virt(row_dims, row_strides);
    g->pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, lg);
    g->pointwise(CUDNN_POINTWISE_ADD, mx, lg, stats);
    // P V takes P in the input type.
    auto probs = g->virt(sc_dims, sc_strides, dropout ? CUDNN_DATA_FLOAT : io);
    g->pointwise(CUDNN_POINTWISE_DIV, ex, sum, probs);
    if (dropout) {
      dropout_mask();
      auto kept = g->virt(sc_dims, sc_strides);
      g->pointwise(CUDNN_POINTWISE_MUL, probs, mask, kept);
      probs = g->virt(sc_dims, sc_strides, io);
      g->pointwise(CUDNN_POINTWISE_MUL, kept, g->scalar(&g->dropout_scale), probs);
    }
    g->matmul(probs, v, o);
  } else {
    auto q = g->tensor(qkv_dims, qkv_strides, io, false, &g->q);
    auto kt = g->tensor(t_dims, t_strides, io, false, &g->k);
    auto vt = g->tensor(t_dims, t_strides, io, false, &g->v);
    auto o = g->tensor(qkv_dims, o_strides, io, false, &g->o);
    auto dout = g->tensor(qkv_dims, o_strides, io, false, &g->dout);
    auto stats = g->tensor(row_dims, row_strides, CUDNN_DATA_FLOAT, false, &g->stats);
    auto dq = g->tensor(qkv_dims, qkv_strides, io, false, &g->dq);
    auto dk = g->tensor(qkv_dims, qkv_strides, io, false, &g->dk);
    auto dv = g->tensor(qkv_dims, qkv_strides, io, false, &g->dv);
    if (dropout) dropout_mask();
    // softmax_sum = rowsum(dO * O) * (1 - p): a float buffer of the call's (in the workspace).
    auto m = g->virt(qkv_dims, {h * s * d, s * d, h * d, 1});
    g->pointwise(CUDNN_POINTWISE_MUL, dout, o, m);
    auto rs = g->virt(row_dims, row_strides);
    g->reduction(CUDNN_REDUCE_TENSOR_ADD, m, rs);
    auto softmax_sum = g->tensor(row_dims, row_strides, CUDNN_DATA_FLOAT, false, &g->softmax_sum);
    g->softmax_sum_bytes = b * h * s * static_cast<int64_t>(sizeof(float));
    g->pointwise(CUDNN_POINTWISE_MUL, rs, g->scalar(dropout ? &g->dropout_keep : &g->one),
                 softmax_sum);
    // P recomputed from the statistics: exp(mask(scale * Q K^T - stats)).
    auto s1 = g->virt(sc_dims, sc_strides);
    g->matmul(q, kt, s1);
    auto s2 = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_MUL, s1, g->scalar(&g->scale), s2);
    auto s3 = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_SUB, s2, stats, s3);
    auto s4 = g->causal(s3, sc_dims, sc_strides);
    auto e = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_EXP, s4, nullptr, e);
    auto pd = e;
    if (dropout) {
      auto kept = g->virt(sc_dims, sc_strides);
      g->pointwise(CUDNN_POINTWISE_MUL, e, mask, kept);
      pd = g->virt(sc_dims, sc_strides);
      g->pointwise(CUDNN_POINTWISE_MUL, kept, g->scalar(&g->dropout_scale), pd);
    }
    // dV = P^T dO
    auto pt = g->virt(sc_dims, sc_t_strides, io);
    g->reshape(pd, pt);
    g->matmul(pt, dout, dv);
    // dS = scale * P * (dP - softmax_sum), dP = dO V^T (masked and scaled by the dropout)
    auto dp = g->virt(sc_dims, sc_strides);
    g->matmul(dout, vt, dp);
    if (dropout) {
      auto dpm = g->virt(sc_dims, sc_strides);
      g->pointwise(CUDNN_POINTWISE_MUL, dp, mask, dpm);
      dp = dpm;
    }
    auto dsub = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, dsub);
    auto ds = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_MUL, dsub, e, ds);
    if (dropout) {
      auto dss = g->virt(sc_dims, sc_strides);
      g->pointwise(CUDNN_POINTWISE_MUL, ds, g->scalar(&g->dropout_scale), dss);
      ds = dss;
    }
    auto ds_scaled = g->virt(sc_dims, sc_strides);
    g->pointwise(CUDNN_POINTWISE_MUL, ds, g->scalar(&g->scale), ds_scaled);
    // dK = dS^T Q
    auto dst = g->virt(sc_dims, sc_t_strides, io);
    g->reshape(ds_scaled, dst);
    g->matmul(dst, q, dk);
    // dQ = dS K (K back from K^T by a reshape)
    auto k = g->virt(qkv_dims, qkv_strides, io);
    g->reshape(kt, k);
    if (deterministic_) {
      g->matmul(ds_scaled, k, dq);
    } else {
      auto acc =
          g->tensor(qkv_dims, {h * s * d, s * d, d, 1}, CUDNN_DATA_FLOAT, false, &g->dq_accum);
      g->dq_accum_bytes = b * h * s * d * static_cast<int64_t>(sizeof(float));
      g->matmul(ds_scaled, k, acc);
      g->pointwise(CUDNN_POINTWISE_IDENTITY, acc, nullptr, dq);
    }
  }
  g->build(static_cast<cudnnHandle_t>(handle_), what);
  return *plans_.emplace(key, std::move(g)).first->second;
}

namespace {

// The variant pack of one call: every non-virtual tensor's uid and address, and the workspace.
void execute(const CudnnLibrary& lib, cudnnHandle_t handle, const CudnnAttention::Plan& g,
             std::vector<std::pair<int64_t, void*>> bound, void* workspace) {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [uid, ptr] : bound)
    if (uid != 0) {
      uids.push_back(uid);
      ptrs.push_back(ptr);
    }
  for (const auto& [uid, ptr] : g.scalars) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(ptr));  // read only: cuDNN's API takes void*
  }
  Desc pack(lib, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "the variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
           static_cast<int64_t>(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(),
           static_cast<int64_t>(ptrs.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace);
  pack.finalize();
  const cudnnStatus_t st = lib.execute(handle, g.plan->get(), pack.get());
  if (st != CUDNN_STATUS_SUCCESS) fail(lib, st, "executing the plan");
}

char* at(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data()) + elements * static_cast<int64_t>(dtype_size(t.dtype()));
}

// The call's seed [0] and offset [2] into the device words its plan reads, in stream order (the
// previous call's plan has read its own by then) and without waiting for the stream; computed by
// a kernel, which reads a captured step's stream base (store_cudnn_seed_offset_cuda).
void store_seed_offset(void* words, RngStream rng, cudaStream_t stream) {
  store_cudnn_seed_offset_cuda(static_cast<int64_t*>(words), rng, stream);
}

}  // namespace

void CudnnAttention::forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                             double dropout_p, RngStream rng, Workspace& ws) {
  const int64_t b = qkv.dim(0), s = qkv.dim(1), hd = qkv.dim(2) / (3 * heads);
  Plan& g = plan(false, b, s, heads, hd, qkv.dtype(), dropout_p);
  if (dropout_p > 0) {
    store_seed_offset(seed_offset_, rng, stream_);
  }
  auto* so = static_cast<int64_t*>(seed_offset_);
  void* workspace =
      g.workspace_bytes > 0 ? ws.get(static_cast<size_t>(g.workspace_bytes)) : nullptr;
  execute(*lib_, static_cast<cudnnHandle_t>(handle_), g,
          {{g.q, at(qkv, 0)},
           {g.k, at(qkv, hd)},
           {g.v, at(qkv, 2 * hd)},
           {g.o, out.data()},
           {g.stats, stats.data()},
           {g.seed, so},
           {g.offset, so + 2}},
          workspace);
}

void CudnnAttention::backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& stats, int64_t heads,
                              double dropout_p, RngStream rng, Workspace& ws) {
  const int64_t b = qkv.dim(0), s = qkv.dim(1), hd = qkv.dim(2) / (3 * heads);
  Plan& g = plan(true, b, s, heads, hd, qkv.dtype(), dropout_p);
  if (dropout_p > 0) {
    store_seed_offset(seed_offset_, rng, stream_);
  }
  auto* so = static_cast<int64_t*>(seed_offset_);
  // The workspace: cuDNN's, then softmax_sum, then (accumulating) dQ's float accumulator, each
  // 256-byte aligned.
  const auto round = [](int64_t n) { return (n + 255) / 256 * 256; };
  const int64_t own = round(g.workspace_bytes), sum_at = own,
                acc_at = sum_at + round(g.softmax_sum_bytes),
                total = acc_at + round(g.dq_accum_bytes);
  auto* base = static_cast<char*>(ws.get(static_cast<size_t>(total)));
  if (g.dq_accum != 0)
    CUDA_CHECK(cudaMemsetAsync(base + acc_at, 0, static_cast<size_t>(g.dq_accum_bytes), stream_));
  execute(*lib_, static_cast<cudnnHandle_t>(handle_), g,
          {{g.q, at(qkv, 0)},
           {g.k, at(qkv, hd)},
           {g.v, at(qkv, 2 * hd)},
           {g.o, out.data()},
           {g.dout, dout.data()},
           {g.stats, stats.data()},
           {g.dq, at(dqkv, 0)},
           {g.dk, at(dqkv, hd)},
           {g.dv, at(dqkv, 2 * hd)},
           {g.seed, so},
           {g.offset, so + 2},
           {g.softmax_sum, base + sum_at},
           {g.dq_accum, base + acc_at}},
          base);
}

}  // namespace mtnlg
