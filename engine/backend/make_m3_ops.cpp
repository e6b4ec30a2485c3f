// MakeM3Ops: picks the implementation by the device's type; the CUDA one where the build has it
// (M3_HAVE_CUDA).
#include "engine/backend/make_m3_ops.h"

#include "engine/backend/cpu/cpu_m3_ops.h"
#include "shared/error.h"
#ifdef M3_HAVE_CUDA
#include "engine/backend/cuda/cuda_m3_ops.h"
#endif

namespace m3::engine::backend {

std::unique_ptr<M3Ops> MakeM3Ops(Device& device) {
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device)) return MakeCpuM3Ops(*cpu);
#ifdef M3_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) return MakeCudaM3Ops(*cuda);
#endif
  throw Error(ErrorCode::kUnsupported, "no MiniMax-M3 ops for device " + device.name());
}

}  // namespace m3::engine::backend
