// Per-tensor FP8 scaling, as Transformer Engine does it (its DelayedScaling and
// Float8CurrentScaling recipes): a tensor x is cast as q = fp8(x * scale) and a GEMM of two cast
// operands is scaled back by scale_inv_a * scale_inv_b (cuBLASLt's A/B scale pointers; the CPU's
// emulation multiplies its output, fp8_gemm_emulated in tests, later the CPU backend).
//
// Delayed scaling (TE's default): the scale a step uses comes from the amaxes (max |x|) of earlier
// steps. Each tensor keeps an amax history of amax_history_len steps, slot 0 the current one.
// A step records its amax in slot 0 (the largest of the step's calls); at the step's end, update()
// takes amax = the history's largest (`max`, TE's default) or slot 0 (`most_recent`), sets
//   scale = fp8_max / amax / 2^margin    (kept as it was when amax is 0 or not finite),
//   scale_inv = 1 / scale,
// and rolls the window: each slot moves down one, the oldest leaves, slot 0 is zeroed for the next
// step (TE's torch.roll(history, -1) then history[0] = 0). Current scaling: the scale comes from
// the tensor's own amax at the cast (fp8_scale_for; model/fp8_linear.cc), no state.
//
// The state (scale, scale_inv, history) is what a checkpoint saves: serialize()/deserialize()
// round-trip it bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernels/fp8_math.h"

namespace mtnlg {

enum class Fp8ScalingMode { kDelayed = 0, kCurrent = 1 };
enum class Fp8AmaxAlgo { kMax = 0, kMostRecent = 1 };

// A recipe's FP8 settings. format: "hybrid" (E4M3 forward, E5M2 gradients: TE's default) or
// "e4m3" (E4M3 everywhere).
struct Fp8Options {
  bool hybrid = true;
  Fp8ScalingMode scaling = Fp8ScalingMode::kDelayed;
  int64_t amax_history_len = 1024;
  int margin = 0;
  Fp8AmaxAlgo amax_algo = Fp8AmaxAlgo::kMax;
  // Each weight's cast kept from its first use in a frozen-weights window (an iteration's
  // micro-batches) to the window's end, as Transformer Engine casts weights on the first
  // micro-batch only: the same values, 2 bytes a linear weight's element (model/fp8_linear.h).
  bool cache_weights = true;
  // The format of a forward operand (activations, weights) and of a gradient.
  Fp8Format forward_format() const { return Fp8Format::kE4M3; }
  Fp8Format gradient_format() const { return hybrid ? Fp8Format::kE5M2 : Fp8Format::kE4M3; }
};

// The scale a tensor of this amax gets: fp8_max / amax / 2^margin; `fallback` where amax is 0 or
// not finite (TE keeps the previous scale; a first cast of an all-zero tensor keeps 1).
float fp8_scale_for(float amax, Fp8Format format, int margin, float fallback);

class Fp8TensorScaling {
 public:
  Fp8TensorScaling(Fp8Format format, const Fp8Options& o);

  Fp8Format format() const { return format_; }
  float scale() const { return scale_; }
  float scale_inv() const { return scale_inv_; }
  const std::vector<float>& history() const { return history_; }

  // A cast this step saw amax: slot 0 keeps the largest of the step's.
  void record(float amax);
  // The step's end (delayed scaling): the next step's scale from the history, then the roll.
  void update();

  // Little-endian bytes: format, mode, margin, algorithm, history length, scale, scale_inv,
  // history.
  std::string serialize() const;
  // Throws corruption naming `what` when the bytes are not one serialized state, and
  // invalid_argument when they were saved under other settings (format, length, margin, mode).
  void deserialize(const std::string& bytes, const std::string& what);

 private:
  Fp8Format format_;
  Fp8Options o_;
  float scale_ = 1.0f, scale_inv_ = 1.0f;
  std::vector<float> history_;
};

// q[i] = fp8(x[i] * scale) for n elements (the grid's values as floats); returns max |x[i]|.
float fp8_quantize(const float* x, float* q, int64_t n, float scale, Fp8Format format);

}  // namespace mtnlg
