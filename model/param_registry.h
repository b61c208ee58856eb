// ParamRegistry: every trainable tensor of a model stage, by name, with what the optimizer,
// the grad-norm, tensor parallelism and checkpoints need to know about it.
//
// Specs are registered first (no memory), so a planner can count parameters of a 530B model
// without allocating; allocate() then gives each parameter its value and gradient on a
// backend. Entries live in a deque: references returned by add()/get() stay valid.
// Not thread-safe.
#pragma once

#include <deque>
#include <string>
#include <unordered_map>

#include <vector>

#include "core/backend.h"
#include "core/state_tensor.h"
#include "core/tensor.h"

namespace mtnlg {

// A parameter that two pipeline stages hold (the word embeddings: the first stage's embedding
// and the last stage's LM head). Their gradients are summed over the embedding group; the norm
// counts the owner's copy only. One stage holding both uses: kNone.
enum class Tied : uint8_t { kNone, kOwner, kCopy };

struct ParamSpec {
  std::string name;        // Megatron-style, e.g. "layers.3.self_attention.query_key_value.weight"
  Shape global_shape;      // the unsplit shape
  Shape local_shape;       // this rank's shard (== global_shape at tensor parallel size 1)
  int partition_dim = -1;  // dimension a tensor-parallel split cuts; -1: replicated
  bool no_decay = false;   // biases and LayerNorm parameters: no weight decay
  // Initialisation: normal(0, init_std) when init_std > 0, otherwise the constant init_value.
  double init_std = 0.0;
  double init_value = 0.0;
  int64_t shard_index = 0;  // which contiguous block along partition_dim this rank holds (tp rank)
  // Rows of dimension 0 that carry meaning (the vocabulary of a padded embedding); 0: all.
  int64_t valid_rows = 0;
  Tied tied = Tied::kNone;
};

struct Param {
  ParamSpec spec;
  Tensor value;
  // Same shape and dtype as value; accumulates over micro-batches. A view into the registry's
  // one gradient buffer (grad_buffer()), at the parameter's place in registration order.
  Tensor grad;
};

class ParamRegistry {
 public:
  Param& add(ParamSpec spec);  // throws on a duplicate name
  Param& get(const std::string& name);
  const Param& get(const std::string& name) const;
  bool contains(const std::string& name) const;

  std::deque<Param>& params() { return params_; }
  const std::deque<Param>& params() const { return params_; }

  int64_t local_numel() const;  // elements held by this rank
  int64_t global_numel() const;

  // Allocates every value on `backend`, and one contiguous gradient buffer whose consecutive
  // pieces are the parameters' grads, in registration order (zero-filled). A run of consecutive
  // parameters is then one contiguous range: data-parallel buckets reduce it in place, and
  // zeroing is one fill (Megatron's DistributedDataParallel grad buffer).
  void allocate(Backend& backend, DType dtype);
  // Mixed precision: values in `dtype` (bf16), the gradient buffer in `grad_dtype` (fp32 main
  // gradients, accumulated over micro-batches and reduced in fp32). pad_multiple: the buffer is
  // local_numel() rounded up to a multiple of it, the tail zero and no parameter's (ZeRO-1 pads
  // to the data size so that its reduce-scatter reads the buffer in place, with no copy).
  void allocate(Backend& backend, DType dtype, DType grad_dtype, int64_t pad_multiple = 1);
  // Every gradient, flat in registration order, then the padding (undefined before allocate()).
  const Tensor& grad_buffer() const { return grad_buffer_; }
  // Fills values per spec from the counter-based RNG: element i of parameter p is drawn from
  // stream hash(p.name) at its GLOBAL flat index, so any tensor-parallel layout starts from the
  // same global weights (global_index maps a shard's element to its global flat index). Drawn
  // `chunk` elements at a time on every OpenMP thread; the values do not depend on either.
  static constexpr int64_t kInitChunk = int64_t{1} << 22;
  void init_values(Backend& backend, uint64_t seed, int64_t chunk = kInitChunk);
  void zero_grads(Backend& backend);
  // Every value as checkpoint state (core/state_tensor.h): named by the parameter, its
  // tensor-parallel shard as the box, the whole box held.
  std::vector<StateTensor> state() const;

 private:
  std::deque<Param> params_;
  Tensor grad_buffer_;
  // name -> position in params_: lookups stay O(1) for a model of thousands of layers (a linear
  // scan made registering 10,000 layers quadratic).
  std::unordered_map<std::string, size_t> index_;
};

// Global flat index of element `local` of this rank's shard of `spec` (partition dim 0 of any
// rank, or dim 1 of a 2-D parameter; replicated parameters map to themselves).
int64_t global_index(const ParamSpec& spec, int64_t local);

// `tensor` described as the whole of `spec`'s shard, named `name` (parameters and the optimizer
// state shaped like them).
StateTensor shard_state(const ParamSpec& spec, std::string name, const Tensor& tensor);

// 64-bit FNV-1a, the stream id of a parameter's init.
uint64_t name_hash(const std::string& name);

}  // namespace mtnlg
