// The linear layers' GEMMs in FP8 (precision: fp8), as Transformer Engine runs them: each GEMM's
// two operands cast to FP8 with a per-tensor scale (the input x and the weight W in E4M3, the
// output gradient dy in E5M2 under `hybrid`, E4M3 under `e4m3`), multiplied with fp32 sums, the
// result scaled by both scales' inverses:
//   forward        y   = (q(x s_x) q(W s_w)^T) / (s_x s_w) + b
//   input grad     dx  = (q(dy s_g) q(W s_w)) / (s_g s_w)
//   weight grad    dW += (q(dy s_g)^T q(x s_x)) / (s_g s_x)
// the bias gradient from dy itself, everything else in bf16. The casts (Backend::fp8_cast) hold
// the FP8 values in bf16, exactly; Backend::gemm_fp8 multiplies them: the bf16 GEMM on the CPU
// (the emulation), cuBLASLt's FP8 GEMMs on a GPU where they apply.
//
// Scales (core/fp8_scaling.h): delayed scaling takes each tensor's scale from the amaxes of
// earlier optimizer steps; a step's casts raise their amax in a word on the device (no read back
// per cast), and end_step() (the trainer's, after the optimizer) reads the words once, takes the
// step's largest over the data-parallel group and rolls the histories,
// so every data-parallel layout and micro-batch count casts with the same scales. (Transformer
// Engine updates after each micro-batch's forward; per step is what makes layouts agree.)
// Evaluation's forwards cast with the scales as they stand and record nothing. Current scaling
// takes the scale from the tensor itself at each cast and keeps no state.
// Tensor parallelism: a rank casts its shard of a weight (and of a row-parallel input or a
// column-parallel output gradient), so every amax is the largest over the tensor group too: at
// end_step for delayed scaling (the trainer passes both groups), at each cast for current
// scaling (one float all-reduced). Every layout then casts with the one-process run's scales. A
// GEMM's alpha is the product of its operands' scale_inv (1/scale in float, as Transformer Engine
// keeps it).
//
// Backward casts x again rather than keeping the forward's cast: the same scale gives the same
// values (recording the same amax again changes nothing), and only the cast buffers (x, dy, and
// W's for casts outside a window: the largest of the stage's linear layers) exist at any time.
// Weights (fp8.cache_weights, the default): inside a frozen-weights window (Backend::
// begin_frozen_weights: an iteration's forwards and backwards, an evaluation) the weights and
// their scales do not change, so each weight is cast once, on its first use, into its own place
// in a cache of the stage's linear weights (2 bytes an element) and reused by every micro-batch's
// forward and backward until the window ends (Transformer Engine casts weights on the first
// micro-batch only). The values are the ones a fresh cast gives; the backend is told to hold the
// weight (Backend::hold_weight: the CPU refuses a write into it until the window ends).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/fp8_scaling.h"
#include "core/state_tensor.h"
#include "model/gpt_config.h"
#include "model/param_registry.h"
#include "parallel/communicator.h"

namespace mtnlg {

// One linear layer's three tensors' scaling.
struct Fp8LinearScaling {
  explicit Fp8LinearScaling(const Fp8Options& o)
      : input(o.forward_format(), o), weight(o.forward_format(), o), grad(o.gradient_format(), o) {}
  Fp8TensorScaling input, weight, grad;
};

// A stage's FP8 state: the scaling of each local transformer layer's four linear layers and the
// cast buffers. Owned by GPTStage; its layers hold a pointer.
class Fp8Linears {
 public:
  enum Which { kQkv = 0, kDense = 1, kFc1 = 2, kFc2 = 3 };
  static constexpr int kPerLayer = 4;
  static const char* name(Which w);

  // layers: the global indexes of the stage's transformer layers; tensor: their tensor-parallel
  // group (null or one rank: none), over which current scaling reduces each cast's amax.
  Fp8Linears(const Fp8Options& o, std::vector<int64_t> layers, Communicator* tensor = nullptr);

  const Fp8Options& options() const { return o_; }
  Fp8LinearScaling& at(int64_t layer, Which w);

  // q(t): t cast into this stage's buffer `slot` (0 x, 1 W, 2 dy) as a bf16 tensor of t's shape,
  // with the tensor's scale (delayed: as it stands, the amax recorded; current: from t's amax).
  // Returns the cast, the scale's inverse and the format.
  struct Cast {
    Tensor q;
    double scale_inv;
    Fp8Format format;
  };
  Cast cast(Backend& be, int slot, const Tensor& t, Fp8TensorScaling& s);
  // q(w) for a weight w with its scaling s (the `weight` of one of at()'s): inside a frozen-weights
  // window with cache_weights, the cast made at w's first use in the window (made now if this is
  // it); otherwise cast(be, 1, w, s).
  Cast cast_weight(Backend& be, const Tensor& w, Fp8TensorScaling& s);
  // Casts made and reused by cast_weight since this object was made (what the tests check).
  struct WeightCastCounts {
    int64_t made = 0, reused = 0;
  };
  WeightCastCounts weight_cast_counts() const { return weight_counts_; }

  // The step's end (delayed scaling): each tensor's amax of the step made the largest over
  // `groups` (null entries skipped: the data-parallel and tensor-parallel groups), then every
  // scale updated and the histories rolled. Current scaling: nothing.
  void end_step(const std::vector<Communicator*>& groups);

  // The cast buffers' elements (bf16) for micro-batches of b sequences: the largest input x,
  // weight W and output gradient dy of a layer's four linear layers (the planner's term too).
  struct BufferSizes {
    int64_t x, w, dy;
  };
  static BufferSizes buffer_elements(const GPTConfig& c, int64_t b);
  // Delayed scaling's amax words (i32, on the backend's device) for a stage of `layers` layers:
  // one per tensor (input, weight, grad of each linear layer) and evaluation's.
  static int64_t amax_words(int64_t layers) { return layers * kPerLayer * 3 + 1; }
  // The weight cache's elements (bf16) for a stage of `layers` layers: each layer's four local
  // linear weights (qkv [3h/tp, h], dense [h, h/tp], fc1 [f/tp, h], fc2 [h, f/tp]); 0 without
  // cache_weights. The planner's term too.
  static int64_t weight_cache_elements(const GPTConfig& c, int64_t layers, const Fp8Options& o);
  // Makes the buffers that size, the amax words and the weight cache (GPTStage, with its other
  // scratch).
  void reserve(Backend& be, const GPTConfig& c, int64_t b);

  // Every tensor's scaling state, in layer order, under names a checkpoint keeps
  // ("layers.3.mlp.fc1.input"); load() takes what save() wrote (a missing name is an error
  // naming it).
  std::vector<std::pair<std::string, std::string>> save() const;
  void load(const std::vector<std::pair<std::string, std::string>>& states);

  // The state as checkpoint tensors ("fp8_scaling." + the names above), each the serialized bytes
  // two to an f32 element (values 0..65535, exact: a checkpoint stores floats), replicated (no
  // tensor-parallel split; the data-parallel replicas hold the same state), and back.
  static constexpr const char* kStatePrefix = "fp8_scaling.";
  std::vector<StateTensor> state_tensors() const;
  static std::string bytes_of(const Tensor& words);  // a CPU f32 tensor

  // Whether casts record their amaxes (training; evaluation's forwards leave the scales alone).
  // A change forgets the cached weight casts (those made while not recording recorded no amax).
  void set_recording(bool on) {
    if (on != recording_) cached_in_.assign(cached_in_.size(), 0);
    recording_ = on;
  }

 private:
  Fp8Options o_;
  std::vector<int64_t> layers_;
  std::vector<Fp8LinearScaling> scaling_;  // kPerLayer per local layer
  Communicator* tensor_;
  // The word of a cast's tensor in amax_bits_ (3 per linear layer: input, weight, grad).
  int64_t word_of(const Fp8TensorScaling& s) const;

  Cast cast_into(Backend& be, Tensor q, const Tensor& t, Fp8TensorScaling& s);

  Tensor buffers_[3];
  // cache_weights: the stage's linear weights' casts, kPerLayer per local layer in at()'s order
  // (offsets in weight_offset_), each valid in the frozen-weights window numbered in cached_in_.
  Tensor weight_cache_;
  std::vector<int64_t> weight_offset_;
  std::vector<uint64_t> cached_in_;
  std::vector<Cast> cached_;
  WeightCastCounts weight_counts_;
  // Delayed scaling: each tensor's amax of the step as float bits on the backend's device
  // (Backend::fp8_cast_accumulate), and a last word for evaluation's casts; made by reserve().
  Tensor amax_bits_;
  Backend* be_ = nullptr;  // reserve()'s, which made amax_bits_
  bool recording_ = true;
};

// y = x W^T through FP8 (x [.., in], W [out, in], y [.., out]), no bias: a row-parallel layer's
// partial product, reduced over the tensor group before its bias.
void fp8_gemm_forward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor y, const Tensor& x,
                      const Param& w);
// y = x W^T + b through FP8; act_out, when given, gets act(y) (fc1's GeLU).
void fp8_linear_forward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor y, const Tensor& x,
                        const Param& w, const Param& b, Tensor* act_out = nullptr,
                        Activation act = Activation::kGelu);
// linear_backward's contract (model/linear.h) through FP8: dx (skipped when undefined) =
// dy W, w.grad += dy^T x, b->grad += sum dy (b null: the caller sums it).
void fp8_linear_backward(Backend& be, Fp8Linears& f, Fp8LinearScaling& s, Tensor dx,
                         const Tensor& dy, const Tensor& x, Param& w, Param* b);

}  // namespace mtnlg
