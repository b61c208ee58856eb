// Backend::capture on CUDA: the work's kernels recorded from the backend's stream as a CUDA graph
// and replayed with one launch (issue #36 item 4: GPT-2 124M's step is bound by its ~300
// launches). What would make a replay wrong is refused while capturing (cuda_backend_impl.h:
// capturing_): a wait for the device, an allocation, a copy from or to the host, more id checks
// than the backend's words.
#include <cuda_runtime.h>

#include <memory>
#include <utility>
#include <vector>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"

namespace mtnlg {

namespace {

struct GraphExecDeleter {
  void operator()(cudaGraphExec_t e) const { (void)cudaGraphExecDestroy(e); }
};
using GraphExecPtr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

class CudaGraphWork final : public CapturedWork {
 public:
  // `backend` must outlive this (a replay launches on its stream).
  CudaGraphWork(CudaBackend& backend, const uint64_t& epoch, GraphExecPtr exec,
                std::vector<DeferredIdChecks::Check> ids, int64_t nodes)
      : CapturedWork(epoch),
        backend_(backend),
        exec_(std::move(exec)),
        ids_(std::move(ids)),
        nodes_(nodes) {}
  void do_replay() override { backend_.replay_graph(exec_.get(), ids_); }
  int64_t launches() const override { return nodes_; }

 private:
  CudaBackend& backend_;
  GraphExecPtr exec_;
  std::vector<DeferredIdChecks::Check> ids_;
  int64_t nodes_;
};

}  // namespace

std::unique_ptr<CapturedWork> CudaBackend::capture(std::function<void()> work) {
  // Reads what earlier checks found, so that the graph's checks take words 0..k.
  synchronize();
  CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  try {
    work();
  } catch (...) {
    capturing_ = false;
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(stream(), &broken);  // invalidated or not: the stream is free
    if (broken != nullptr) (void)cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    (void)id_checks_.take_pending();  // recorded, never run
    throw;
  }
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
  std::vector<DeferredIdChecks::Check> ids = id_checks_.take_pending();
  size_t nodes = 0;  // every node was one launch (or copy, or memset) on the stream
  cudaError_t made = cudaGraphGetNodes(graph, nullptr, &nodes);
  cudaGraphExec_t exec = nullptr;
  if (made == cudaSuccess) made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  CUDA_CHECK(made);
  return std::make_unique<CudaGraphWork>(*this, recording_epoch_, GraphExecPtr(exec),
                                         std::move(ids), static_cast<int64_t>(nodes));
}

void CudaBackend::replay_graph(cudaGraphExec_t exec,
                               const std::vector<DeferredIdChecks::Check>& ids) {
  if (!id_checks_.replay_pending(ids)) {
    synchronize();  // other checks hold the graph's words: read them first
    MTNLG_CHECK(id_checks_.replay_pending(ids));
  }
  CUDA_CHECK(cudaGraphLaunch(exec, stream()));
}

}  // namespace mtnlg
