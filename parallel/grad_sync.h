// GradSync: sums parameter gradients over the data-parallel group, in buckets, either after
// backward or overlapped with it (Megatron-LM's --overlap-grad-reduce, PyTorch DDP's buckets).
//
// Each rank computed its gradient on 1/dp of the global batch, already scaled by
// 1 / (tokens of the whole global batch), so the data-parallel gradient is the SUM of the ranks'
// gradients. Gradients are grouped into buckets of about `bucket_bytes` in reverse registration
// order (the order backward finishes them: last layers first), each bucket all-reduced with one
// collective. When the gradients are consecutive views of one buffer (ParamRegistry's gradient
// buffer, on the backend's device) a bucket is a range of it, reduced in place; otherwise
// (separate tensors, or a reduction in bf16) it is copied into a staging buffer in the
// reduction's dtype (Backend::copy, rounding there) and back after. Everything stays on the
// backend's device: the communicator takes the memory where it lives (Gloo: host; NCCL: GPU).
// Bucket boundaries depend only on the parameter list, and buckets are reduced strictly in bucket
// order, so every rank issues the same collectives in the same order.
//
// Modes:
//   kAfterBackward: wait() reduces every bucket on the calling thread (staged: one buffer the
//     size of the largest bucket; all of them when narrowed from the buffer).
//   kOverlap: a communication thread owned by this object drives `comm` exclusively (pass a
//     communicator no other thread uses: ProcessGroups::data_grads). During the LAST
//     micro-batch's backward the caller reports each gradient final with mark_ready(); once the
//     next bucket in order has all its gradients, it is queued to the communication thread (staged:
//     packed first, on the calling thread), so its all-reduce runs while backward goes on (in
//     place, backward writes only gradients of later buckets meanwhile). wait() queues the
//     buckets not yet launched, blocks until all are reduced (staged: and unpacks). Staged, the
//     buffers of all buckets live at once: one buffer the size of all gradients. The
//     communication thread only calls the communicator; copies stay on the caller's thread.
//   kReduceScatter (ZeRO-1): wait() reduce-scatters the whole gradient buffer (zero-padded to a
//     multiple of the group's size, parallel/zero_partition.h) so that partition() holds this
//     rank's summed partition; the grads keep this rank's own values. No buckets, no overlap.
// Tied parameters (set_tied: the word embeddings held by the first and last pipeline stages) are
// also summed here, over their own group: before the reduce-scatter, or after the all-reduce
// (whose in-place buckets may still be in flight until then). Sums commute, so every layout gets
// the same gradient: one path for every reduction of a gradient.
// Failure: an exception of the communication thread (io_error from a dead or hung peer) is
// rethrown by wait() on the caller's thread; after one, every later wait() rethrows it.
//
// Ownership: the gradient tensors are handles to the caller's storage; `comm` is borrowed and
// must outlive this object. The destructor joins the communication thread (waiting at most for
// the collective in flight, which the communicator bounds by its timeout).
// Thread safety: one caller thread drives the public methods; the communication thread is
// internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "parallel/communicator.h"
#include "parallel/zero_partition.h"

namespace mtnlg {

class GradSync {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;
  enum class Mode { kAfterBackward, kOverlap, kReduceScatter };

  // grads: every gradient tensor, in parameter registration order (same dtype). comm: the data
  // group (kOverlap: one only the communication thread uses); with one rank wait() and
  // mark_ready() return at once. buffer: when defined, the flat tensor the grads are consecutive
  // views of (checked); buckets then reduce their range of it in place. kReduceScatter needs it.
  // reduce_dtype: kF32 (the gradients' own dtype), or kBF16 for fp32 gradients: each bucket (or
  // ZeRO-1's whole buffer) is rounded to bf16 (nearest even) into a bf16 staging copy, summed
  // over the group in bf16 (half the bytes; Megatron's parallel.grad_reduce_dtype: bf16) and
  // widened back. With a buffer the staging holds all gradients (ZeRO-1: the padded buffer and a
  // partition).
  // alloc: where the reduction's own buffers come from (ZeRO-1's partition, staging copies):
  // that backend's alloc(), so they count in its peak as the planner counts them
  // (cmd/planner.h reduce_scatter_bytes, reduce_staging_bytes); null: host memory.
  GradSync(std::vector<Tensor> grads, Communicator& comm, Mode mode = Mode::kAfterBackward,
           int64_t bucket_bytes = kDefaultBucketBytes, Tensor buffer = Tensor(),
           DType reduce_dtype = DType::kF32, Backend* alloc = nullptr);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // kOverlap only: gradient `index` (registration order) is final for this iteration. Marking
  // one twice in an iteration fails an MTNLG_CHECK. Launches every bucket, in order, whose
  // gradients are all final.
  void mark_ready(Backend& backend, int64_t index);
  // The same, naming the gradient by its tensor (one of the constructor's, by storage).
  void mark_ready(Backend& backend, const Tensor& grad);

  // Sums every gradient over the group, in place (kReduceScatter: into partition()), and the
  // tied ones over their group; then the next iteration may mark again.
  void wait(Backend& backend);

  // Gradients `indices` (registration order) are tied copies: wait() sums them over `group`
  // (borrowed; null or one rank: nothing to sum).
  void set_tied(Communicator* group, std::vector<int64_t> indices);

  // kReduceScatter: this rank's partition of the summed flat gradient [S] (valid from wait()
  // until the optimizer reuses it), how the flat vector splits, and the padded gradient buffer
  // [S x ranks] the reduce-scatter read in place (free after wait() until the next iteration
  // zeroes it: ZeroAdamW all-gathers the updated parameters through these two rather than
  // holding copies of its own).
  Tensor& partition() { return part_; }
  const Tensor& partition() const { return part_; }
  Tensor& staging() { return buffer_; }
  const ZeroPartition& layout() const { return layout_; }

  Mode mode() const { return mode_; }
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  int64_t bucket_of(int64_t index) const { return bucket_of_[static_cast<size_t>(index)]; }
  // Buckets packed and queued this iteration (kOverlap; for tests and logs).
  int64_t num_launched() const { return next_launch_; }
  // Whether buckets are reduced in place in the gradient buffer (no staging copies).
  bool in_place() const { return in_place_; }

 private:
  struct Bucket {
    std::vector<int64_t> params;  // gradient indices, in reverse registration order
    int64_t offset = 0;           // into flat_ when it holds every bucket
    int64_t numel = 0;
    int64_t pending = 0;  // gradients not yet marked this iteration
    Tensor range;         // with a buffer: the bucket's range of it
  };
  // The tensor a bucket is reduced in: its range of the buffer, or its part of flat_.
  Tensor reduced_in(const Bucket& bucket) const;
  void pack(Backend& backend, const Bucket& bucket, Tensor& flat) const;
  void unpack(Backend& backend, const Bucket& bucket, const Tensor& flat) const;
  void launch_ready(Backend& backend);
  void comm_loop();

  std::vector<Tensor> grads_;
  Communicator& comm_;
  const Mode mode_;
  bool in_place_ = false;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> bucket_of_;                     // gradient index -> bucket
  std::vector<char> ready_;                            // gradient index -> marked this iteration
  std::unordered_map<const void*, int64_t> index_of_;  // gradient storage -> index
  Tensor flat_;  // staging in reduce_dtype_ unless in place: all buckets at their offsets, or
                 // (kAfterBackward without a buffer) the largest
  Tensor buffer_;
  DType reduce_dtype_ = DType::kF32;    // the gradient buffer, when given
  ZeroPartition layout_;                // kReduceScatter
  Tensor part_;                         // kReduceScatter: [S]
  Tensor narrow_buffer_, narrow_part_;  // kReduceScatter in bf16: the buffer and [S], rounded
  Communicator* tied_group_ = nullptr;
  std::vector<int64_t> tied_;
  void sum_tied(Backend& backend);
  // kReduceScatter: part_ = this rank's partition of the buffer summed over the group, in
  // reduce_dtype_.
  void reduce_scatter(Backend& backend);
  int64_t next_launch_ = 0;  // the next bucket to queue, in bucket order

  // Shared with the communication thread, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_;  // buckets to reduce, in order
  int64_t reduced_ = 0;        // buckets reduced this iteration
  std::exception_ptr error_;   // the first failure; sticky
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace mtnlg
