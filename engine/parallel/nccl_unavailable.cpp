// NcclGroup in builds without NCCL (no nvcc or no nccl.h): creating one says so.
#include "engine/parallel/nccl_communicator.h"
#include "shared/error.h"

namespace m3::engine::parallel {

bool BuiltWithNccl() {
  return false;
}

NcclGroup::NcclGroup(const std::vector<int>& devices, AllReduceMode) : devices_(devices) {
  throw Error(ErrorCode::kUnsupported,
              "tensor / expert parallelism on GPUs needs NCCL, which this build lacks (build "
              "with the CUDA toolkit and its nccl.h)");
}

NcclGroup::~NcclGroup() = default;

int64_t NcclGroup::peer_max_bytes() const {
  return 0;
}

void NcclGroup::Abort() {}

std::unique_ptr<Communicator> NcclGroup::Bind(int, backend::Device&) {
  throw Error(ErrorCode::kUnsupported, "this build has no NCCL communicator");
}

}  // namespace m3::engine::parallel
