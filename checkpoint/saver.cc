#include "checkpoint/saver.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_dir.h"
#include "core/logging.h"
#include "core/status.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

// Per rank, gathered as f64 words (bit copies, never arithmetic): ok, then per file slot its
// size, checksum and name (kNameWords words of bytes, NUL-padded).
constexpr int kSlots = 2;
constexpr int kNameWords = 16;
constexpr int kSlotWords = 2 + kNameWords;
constexpr int kRecordWords = 1 + kSlots * kSlotWords;

template <typename T>
void put(double* w, const T& v) {
  static_assert(sizeof(T) == sizeof(double));
  std::memcpy(w, &v, sizeof(double));
}
template <typename T>
T get(const double* w) {
  T v;
  std::memcpy(&v, w, sizeof(T));
  return v;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

CheckpointSaver::CheckpointSaver(std::string root, int64_t keep_last, bool async,
                                 Communicator* comm)
    : root_(std::move(root)), keep_last_(keep_last), async_(async), comm_(comm) {}

CheckpointSaver::~CheckpointSaver() {
  if (thread_.joinable()) {
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) {
      try {
        std::rethrow_exception(error_);
      } catch (const std::exception& e) {
        spdlog::error("checkpoint: the last save failed: {}", e.what());
      }
    }
  }
}

void CheckpointSaver::join() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointSaver::check() {
  if (!done_.load()) return;
  join();
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CheckpointSaver::wait() {
  join();
  check();
}

SaveStats CheckpointSaver::last_finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

Tensor& CheckpointSaver::staging(size_t k, const Tensor& like) {
  if (k >= staging_.size()) staging_.resize(k + 1);
  Tensor& host = staging_[k];
  if (!host.defined() || host.shape() != like.shape() || host.dtype() != like.dtype())
    host = Tensor::cpu(like.shape(), like.dtype());  // zero-filled: its pages are touched now
  return host;
}

void CheckpointSaver::reserve(const RankShards& shards) {
  if (!async_) return;
  size_t k = 0;
  for (const auto* list : {&shards.model, &shards.optim})
    for (const StateTensor& s : *list) staging(k++, s.tensor);
  staging_.resize(k);
}

SaveStats CheckpointSaver::save(RankShards shards, CheckpointManifest manifest, Backend& backend,
                                const std::function<void(double)>& before_commit) {
  const auto t0 = Clock::now();
  wait();  // at most one in flight; a failed previous save stops training here
  SaveStats stats;
  stats.iteration = manifest.iteration;
  if (!async_) {
    write_and_commit(shards, std::move(manifest), stats, [&] {
      if (before_commit) before_commit(seconds_since(t0) * 1e3);
    });
    stats = last_finished();
    stats.stall_ms = seconds_since(t0) * 1e3;
    std::lock_guard<std::mutex> lock(mu_);
    finished_.stall_ms = stats.stall_ms;
    return stats;
  }
  // Snapshot: the background thread writes copies, training goes on with the originals.
  backend.synchronize();
  size_t k = 0;
  for (auto* list : {&shards.model, &shards.optim}) {
    for (StateTensor& s : *list) {
      Tensor& host = staging(k++, s.tensor);
      backend.copy(host, s.tensor);
      s.tensor = host;
    }
  }
  staging_.resize(k);
  backend.synchronize();
  stats.stall_ms = seconds_since(t0) * 1e3;
  if (before_commit) before_commit(stats.stall_ms);
  done_.store(false);
  thread_ = std::thread(
      [this, shards = std::move(shards), manifest = std::move(manifest), stats]() mutable {
        try {
          write_and_commit(shards, std::move(manifest), stats);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu_);
          error_ = std::current_exception();
        }
        done_.store(true);
      });
  return stats;
}

void CheckpointSaver::write_and_commit(const RankShards& shards, CheckpointManifest manifest,
                                       SaveStats stats,
                                       const std::function<void()>& before_commit) {
  const int64_t iteration = manifest.iteration;
  const int rank = comm_ != nullptr ? comm_->rank() : 0;
  const int world = comm_ != nullptr ? comm_->size() : 1;
  const std::string tmp = temp_dir_path(root_, iteration);
  const auto t0 = Clock::now();

  // 1. This rank's files.
  Tensor mine = Tensor::cpu({kRecordWords}, DType::kF64);
  double* rec = mine.data_as<double>();
  std::string my_error;
  try {
    std::error_code ec;
    fs::create_directories(tmp, ec);
    if (ec) throw io_error("cannot create the checkpoint directory: " + ec.message(), tmp);
    int slot = 0;
    for (const auto& [file, state] : {std::pair{&shards.model_file, &shards.model},
                                      std::pair{&shards.optim_file, &shards.optim}}) {
      if (file->empty()) continue;
      MTNLG_CHECK_MSG(file->size() < kNameWords * sizeof(double), "file name " << *file);
      const FileDigest d =
          write_shard_file((fs::path(tmp) / *file).string(), *state, shards.coords);
      double* s = rec + 1 + slot * kSlotWords;
      put(s, d.bytes);
      put(s + 1, d.xxh3);
      std::memcpy(s + 2, file->data(), file->size());
      stats.bytes_written += d.bytes;
      ++slot;
    }
    put(rec, int64_t{1});
  } catch (const std::exception& e) {
    my_error = e.what();
    spdlog::error("checkpoint: saving iteration {} failed on this rank: {}", iteration, my_error);
    put(rec, int64_t{0});
  }
  stats.write_seconds = seconds_since(t0);

  // 2. Everyone's outcome (the barrier before the commit).
  Tensor all = Tensor::cpu({static_cast<int64_t>(world) * kRecordWords}, DType::kF64);
  if (comm_ != nullptr && world > 1) {
    comm_->all_gather(all, mine);
  } else {
    std::memcpy(all.data(), mine.data(), mine.nbytes());
  }
  const double* records = all.data_as<double>();
  int64_t failed_rank = -1;
  for (int r = 0; r < world && failed_rank < 0; ++r)
    if (get<int64_t>(records + static_cast<size_t>(r) * kRecordWords) != 1) failed_rank = r;

  if (failed_rank < 0 && before_commit) before_commit();

  // 3. Rank 0 commits.
  Tensor outcome = Tensor::cpu({2}, DType::kF64);
  double* out = outcome.data_as<double>();
  out[0] = 1.0;
  out[1] = static_cast<double>(failed_rank);
  std::string commit_error;
  if (rank == 0) {
    if (failed_rank >= 0) {
      out[0] = 0.0;
      std::error_code ec;
      fs::remove_all(tmp, ec);  // nobody writes there any more
    } else {
      try {
        manifest.files.clear();
        for (int r = 0; r < world; ++r) {
          const double* rr = records + static_cast<size_t>(r) * kRecordWords;
          for (int slot = 0; slot < kSlots; ++slot) {
            const double* s = rr + 1 + slot * kSlotWords;
            char name[kNameWords * sizeof(double) + 1] = {};
            std::memcpy(name, s + 2, kNameWords * sizeof(double));
            if (name[0] == '\0') continue;
            manifest.files.push_back(ManifestFile{name, get<int64_t>(s), get<uint64_t>(s + 1)});
          }
        }
        if (tokenizer_)
          for (ManifestFile& f : write_tokenizer_files((fs::path(tmp) / kTokenizerDir).string(),
                                                       tmp, *tokenizer_, tokenizer_max_length_))
            manifest.files.push_back(std::move(f));
        std::sort(manifest.files.begin(), manifest.files.end(),
                  [](const ManifestFile& a, const ManifestFile& b) { return a.name < b.name; });
        write_file_atomic((fs::path(tmp) / kManifestFile).string(), manifest_to_json(manifest));
        if (const std::optional<std::string> aside = commit_checkpoint(root_, iteration))
          spdlog::warn("checkpoint: the pinned {} of an earlier timeline is kept as {}",
                       iteration_dir_name(iteration), *aside);
        for (const int64_t old : prune_checkpoints(root_, keep_last_))
          spdlog::info("checkpoint: removed iteration {} (checkpoint.keep_last: {})", old,
                       keep_last_);
      } catch (const std::exception& e) {
        commit_error = e.what();
        spdlog::error("checkpoint: committing iteration {} failed: {}", iteration, commit_error);
        out[0] = 0.0;
        out[1] = 0.0;
      }
    }
  }
  // 4. Rank 0's word.
  if (comm_ != nullptr && world > 1) comm_->broadcast(outcome, 0);
  if (out[0] != 1.0) {
    const auto who = static_cast<int64_t>(out[1]);
    std::string why = !my_error.empty() ? my_error : !commit_error.empty() ? commit_error : "";
    throw io_error("saving the checkpoint of iteration " + std::to_string(iteration) +
                       " failed on rank " + std::to_string(who) +
                       (why.empty() ? " (its log says why)" : ": " + why) +
                       "; nothing was committed and the previous checkpoint is intact; free space "
                       "or fix checkpoint.dir and resume",
                   root_);
  }
  const double secs = seconds_since(t0);
  if (rank == 0)
    spdlog::info(
        "checkpoint: saved iteration {} to {} in {:.2f} s ({:.1f} MiB written by this rank at "
        "{:.1f} MiB/s){}",
        iteration, (fs::path(root_) / iteration_dir_name(iteration)).string(), secs,
        static_cast<double>(stats.bytes_written) / 1048576.0,
        stats.write_seconds > 0
            ? static_cast<double>(stats.bytes_written) / 1048576.0 / stats.write_seconds
            : 0.0,
        async_ ? fmt::format(", in the background; training stalled {:.1f} ms", stats.stall_ms)
               : std::string());
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = stats;
}

}  // namespace mtnlg
