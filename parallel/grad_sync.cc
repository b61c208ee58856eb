#include "parallel/grad_sync.h"

#include <algorithm>

namespace mtnlg {

GradSync::GradSync(std::vector<Tensor> grads, Communicator& comm, Mode mode, int64_t bucket_bytes,
                   Tensor buffer, DType reduce_dtype, Backend* alloc)
    : grads_(std::move(grads)),
      comm_(comm),
      mode_(mode),
      buffer_(buffer),
      reduce_dtype_(reduce_dtype) {
  MTNLG_CHECK(bucket_bytes > 0);
  const int64_t n = static_cast<int64_t>(grads_.size());
  bucket_of_.assign(grads_.size(), -1);
  ready_.assign(grads_.size(), 0);
  int64_t largest = 0, total = 0;
  const DType dtype = grads_.empty() ? DType::kF32 : grads_.front().dtype();
  MTNLG_CHECK_MSG(
      reduce_dtype_ == DType::kF32 || (reduce_dtype_ == DType::kBF16 && dtype == DType::kF32),
      "GradSync: reducing " << dtype_name(dtype) << " gradients in " << dtype_name(reduce_dtype_));
  if (reduce_dtype_ == DType::kF32) reduce_dtype_ = dtype;
  const auto make = [alloc](const Shape& shape, DType dt) {
    return alloc != nullptr ? alloc->alloc(shape, dt) : Tensor::cpu(shape, dt);
  };
  Bucket current;
  auto close = [&] {
    current.offset = total;
    current.pending = static_cast<int64_t>(current.params.size());
    largest = std::max(largest, current.numel);
    total += current.numel;
    buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (int64_t i = n; i-- > 0;) {
    const Tensor& grad = grads_[static_cast<size_t>(i)];
    MTNLG_CHECK_MSG(grad.dtype() == dtype, "gradient " << i << " " << grad.str());
    const bool fresh = index_of_.emplace(grad.data(), i).second;
    MTNLG_CHECK_MSG(fresh, "gradient " << i << " shares its storage with another");
    bucket_of_[static_cast<size_t>(i)] = static_cast<int64_t>(buckets_.size());
    current.params.push_back(i);
    current.numel += grad.numel();
    if (current.numel * static_cast<int64_t>(dtype_size(dtype)) >= bucket_bytes) close();
  }
  if (!current.params.empty()) close();
  if (buffer.defined()) {
    // Each gradient must be the next piece of the buffer; a bucket (consecutive parameters) is
    // then the range from its first parameter's offset.
    std::vector<int64_t> offset(grads_.size() + 1, 0);
    const size_t elem = dtype_size(dtype);
    for (size_t i = 0; i < grads_.size(); ++i) {
      MTNLG_CHECK_MSG(grads_[i].data() == static_cast<char*>(buffer.data()) + offset[i] * elem,
                      "gradient " << i << " is not the next piece of the gradient buffer");
      offset[i + 1] = offset[i] + grads_[i].numel();
    }
    // A padded tail (ParamRegistry::allocate's pad_multiple) belongs to no gradient.
    MTNLG_CHECK_LE(offset.back(), buffer.numel());
    MTNLG_CHECK(buffer.dtype() == dtype);
    for (Bucket& bucket : buckets_) {
      const auto first = static_cast<size_t>(bucket.params.back());  // lowest index
      bucket.range = buffer.slice(offset[first], offset[first] + bucket.numel);
    }
    in_place_ = reduce_dtype_ == dtype;
  }
  if (mode_ == Mode::kReduceScatter) {
    MTNLG_CHECK_MSG(buffer.defined(), "GradSync kReduceScatter needs the gradient buffer");
    std::vector<int64_t> numels;
    for (const Tensor& g : grads_) numels.push_back(g.numel());
    layout_ = zero_partition(numels, comm_.size(), comm_.rank());
    // The buffer itself is the reduce-scatter's input: padded to S * dp, no copy of it.
    MTNLG_CHECK_MSG(buffer.numel() == layout_.partition_size * comm_.size(),
                    "GradSync kReduceScatter: the gradient buffer has "
                        << buffer.numel() << " elements, not " << layout_.numel
                        << " padded to a multiple of the data size " << comm_.size() << " ("
                        << layout_.partition_size * comm_.size()
                        << "; ParamRegistry::allocate's pad_multiple)");
    part_ = make({layout_.partition_size}, dtype);
    if (reduce_dtype_ != dtype && comm_.size() > 1) {
      narrow_buffer_ = make({buffer.numel()}, reduce_dtype_);
      narrow_part_ = make({layout_.partition_size}, reduce_dtype_);
    }
    return;
  }
  if (comm_.size() == 1) return;
  // Staging in the reduction's dtype: every bucket at once when they overlap backward or are
  // narrowed from the buffer (so the planner's figure is the gradients' count), else the largest.
  if (!in_place_)
    flat_ = make({mode_ == Mode::kOverlap || buffer.defined() ? total : largest}, reduce_dtype_);
  if (mode_ == Mode::kOverlap) thread_ = std::thread([this] { comm_loop(); });
}

GradSync::~GradSync() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// flat_ holds every bucket at its offset, or (kAfterBackward, no buffer) one bucket at a time.
Tensor GradSync::reduced_in(const Bucket& bucket) const {
  if (in_place_) return bucket.range;
  return bucket.offset + bucket.numel <= flat_.numel()
             ? flat_.slice(bucket.offset, bucket.offset + bucket.numel)
             : flat_.slice(0, bucket.numel);
}

void GradSync::pack(Backend& backend, const Bucket& bucket, Tensor& flat) const {
  if (bucket.range.defined()) {  // the bucket's range of the buffer, rounded in one copy
    backend.copy(flat, bucket.range);
    return;
  }
  int64_t offset = 0;
  for (int64_t i : bucket.params) {
    const Tensor& grad = grads_[static_cast<size_t>(i)];
    const int64_t n = grad.numel();
    Tensor dst = flat.slice(offset, offset + n).view(grad.shape());
    backend.copy(dst, grad);  // a device backend copies to the host buffer
    offset += n;
  }
}

void GradSync::unpack(Backend& backend, const Bucket& bucket, const Tensor& flat) const {
  if (bucket.range.defined()) {
    Tensor range = bucket.range;
    backend.copy(range, flat);
    return;
  }
  int64_t offset = 0;
  for (int64_t i : bucket.params) {
    Tensor grad = grads_[static_cast<size_t>(i)];
    const int64_t n = grad.numel();
    backend.copy(grad, flat.slice(offset, offset + n).view(grad.shape()));
    offset += n;
  }
}

void GradSync::mark_ready(Backend& backend, const Tensor& grad) {
  const auto it = index_of_.find(grad.data());
  MTNLG_CHECK_MSG(it != index_of_.end(), "not a gradient GradSync holds: " << grad.str());
  mark_ready(backend, it->second);
}

void GradSync::mark_ready(Backend& backend, int64_t index) {
  MTNLG_CHECK_MSG(mode_ == Mode::kOverlap, "mark_ready needs GradSync::Mode::kOverlap");
  MTNLG_CHECK(0 <= index && index < static_cast<int64_t>(grads_.size()));
  MTNLG_CHECK_MSG(!ready_[static_cast<size_t>(index)],
                  "gradient " << index << " marked ready twice in one iteration");
  ready_[static_cast<size_t>(index)] = 1;
  --buckets_[static_cast<size_t>(bucket_of(index))].pending;
  if (comm_.size() > 1) launch_ready(backend);
}

// Queues the buckets, strictly in order, whose gradients are all final: a later bucket that
// completes first waits for the earlier ones, so every rank issues the same sequence.
void GradSync::launch_ready(Backend& backend) {
  const int64_t first = next_launch_;
  while (next_launch_ < num_buckets() && buckets_[static_cast<size_t>(next_launch_)].pending == 0)
    ++next_launch_;
  if (next_launch_ == first) return;
  backend.synchronize();  // the gradients' last kernels have run
  if (!in_place_) {
    for (int64_t b = first; b < next_launch_; ++b) {
      const Bucket& bucket = buckets_[static_cast<size_t>(b)];
      Tensor flat = reduced_in(bucket);
      pack(backend, bucket, flat);
    }
    backend.synchronize();  // the staged copies are complete before the other thread reads
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t b = first; b < next_launch_; ++b) queue_.push_back(b);
  }
  cv_.notify_all();
}

void GradSync::comm_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int64_t b = queue_.front();
    queue_.pop_front();
    if (error_) continue;  // the communicator is unusable after a failure
    Tensor flat = reduced_in(buckets_[static_cast<size_t>(b)]);
    lock.unlock();
    std::exception_ptr error;
    try {
      comm_.all_reduce(flat, ReduceOp::kSum);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error)
      error_ = error;
    else
      ++reduced_;
    cv_.notify_all();
  }
}

void GradSync::reduce_scatter(Backend& backend) {
  if (!narrow_buffer_.defined()) {
    comm_.reduce_scatter(part_, buffer_, ReduceOp::kSum);
    return;
  }
  // Rounded to the reduction's dtype on the device, summed there, widened into the partition.
  backend.copy(narrow_buffer_, buffer_);
  backend.synchronize();
  comm_.reduce_scatter(narrow_part_, narrow_buffer_, ReduceOp::kSum);
  backend.copy(part_, narrow_part_);
}

void GradSync::set_tied(Communicator* group, std::vector<int64_t> indices) {
  for (int64_t i : indices) MTNLG_CHECK(0 <= i && i < static_cast<int64_t>(grads_.size()));
  tied_group_ = group;
  tied_ = std::move(indices);
}

void GradSync::sum_tied(Backend& backend) {
  if (tied_group_ == nullptr || tied_group_->size() == 1 || tied_.empty()) return;
  backend.synchronize();
  // The group's communicator takes the gradient where it lives (Gloo: host; NCCL: device).
  for (int64_t i : tied_) tied_group_->all_reduce(grads_[static_cast<size_t>(i)], ReduceOp::kSum);
}

void GradSync::wait(Backend& backend) {
  if (mode_ == Mode::kReduceScatter) {
    sum_tied(backend);  // before: the partition is cut from the summed buffer
    backend.synchronize();
    reduce_scatter(backend);  // reads the buffer (its zero tail too), writes the partition
    return;
  }
  if (comm_.size() == 1) {
    std::fill(ready_.begin(), ready_.end(), 0);
    for (Bucket& bucket : buckets_) bucket.pending = static_cast<int64_t>(bucket.params.size());
    sum_tied(backend);
    return;
  }
  if (mode_ == Mode::kAfterBackward) {
    backend.synchronize();
    for (const Bucket& bucket : buckets_) {
      Tensor flat = reduced_in(bucket);
      if (!in_place_) {
        pack(backend, bucket, flat);
        backend.synchronize();
      }
      comm_.all_reduce(flat, ReduceOp::kSum);
      if (!in_place_) unpack(backend, bucket, flat);
    }
    sum_tied(backend);
    return;
  }
  // Gradients never marked (a parameter backward did not report) are final now.
  for (Bucket& bucket : buckets_) bucket.pending = 0;
  launch_ready(backend);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return error_ || reduced_ == num_buckets(); });
    error = error_;
    if (error) queue_.clear();
    reduced_ = 0;
  }
  next_launch_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  for (Bucket& bucket : buckets_) bucket.pending = static_cast<int64_t>(bucket.params.size());
  if (error) std::rethrow_exception(error);
  if (!in_place_)
    for (const Bucket& bucket : buckets_) unpack(backend, bucket, reduced_in(bucket));
  sum_tied(backend);
}

}  // namespace mtnlg
