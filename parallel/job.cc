#include "parallel/job.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {
namespace {

ParallelSizes sizes_of(const Runtime& runtime, int64_t tensor, int64_t pipeline, int64_t data,
                       const char* data_key) {
  const ParallelSizes sizes = Topology::derive(runtime.world, tensor, pipeline);
  if (data > 0 && data != sizes.data) {
    throw invalid_argument(std::string(data_key) + ": " + std::to_string(data) +
                               " but the job has " + std::to_string(runtime.world) +
                               " ranks = tensor " + std::to_string(sizes.tensor) + " x pipeline " +
                               std::to_string(sizes.pipeline) + " x data " +
                               std::to_string(sizes.data) + "; launch tensor x pipeline x " +
                               data_key + " ranks, or omit " + data_key,
                           data_key);
  }
  return sizes;
}

}  // namespace

Job::Job(Runtime runtime, int64_t tensor, int64_t pipeline, int64_t data, const char* data_key)
    : runtime_(std::move(runtime)),
      topology_(sizes_of(runtime_, tensor, pipeline, data, data_key), runtime_.rank) {
  if (multi_rank()) spdlog::info("{}: {}", runtime_.describe(), topology_.describe());
}

void Job::connect(const GroupFactory& make) {
  if (!multi_rank()) return;
  groups_ = make(topology_, *runtime_.store);
  // Which transport each group got (shared memory within a node, TCP across, NCCL on GPUs).
  std::string carriers;
  for (const Communicator* c :
       {groups_.world.get(), groups_.tensor.get(), groups_.pipeline.get(), groups_.data.get()}) {
    if (c == nullptr || c->size() == 1) continue;
    if (!carriers.empty()) carriers += ", ";
    carriers += c->name();
    carriers += ' ';
    carriers += c->transport();
  }
  if (!carriers.empty()) spdlog::info("transports: {}", carriers);
  const int64_t tp = topology_.sizes().tensor;
  if (tp > 1) {
    Tensor node = Tensor::cpu({1}, DType::kI32);
    node.data_as<int32_t>()[0] = static_cast<int32_t>(runtime_.node);
    Tensor nodes = Tensor::cpu({tp}, DType::kI32);
    groups_.tensor->all_gather(nodes, node);
    const std::vector<int64_t> node_ids(nodes.data_as<int32_t>(), nodes.data_as<int32_t>() + tp);
    const std::string warning = topology_.tensor_group_node_warning(node_ids);
    if (!warning.empty() && topology_.tensor_rank() == 0) spdlog::warn("{}", warning);
  }
}

}  // namespace mtnlg
