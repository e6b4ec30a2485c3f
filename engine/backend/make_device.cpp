// MakeDevice: "cpu" always; "cuda[:N]" when the build has the CUDA device (M3_HAVE_CUDA).
#include "engine/backend/make_device.h"

#include "engine/backend/cpu/cpu_device.h"
#include "shared/error.h"
#ifdef M3_HAVE_CUDA
#include "engine/backend/cuda/cuda_device.h"
#endif

namespace m3::engine::backend {

bool BuiltWithCuda() {
#ifdef M3_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Device> MakeDevice(const std::string& device) {
  if (device == "cpu") return MakeCpuDevice();
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
#ifdef M3_HAVE_CUDA
    return MakeCudaDevice(device);
#else
    throw Error(ErrorCode::kUnsupported,
                "device '" + device +
                    "': this build has no CUDA backend (no CUDA compiler was found when it was "
                    "configured)");
#endif
  }
  throw Error(ErrorCode::kUnsupported,
              "device '" + device + "' is not supported (known: cpu, cuda, cuda:N)");
}

DeviceMemory QueryDeviceMemory(const std::string& device) {
  if (device == "cpu") return {};
#ifdef M3_HAVE_CUDA
  const CudaMemory m = CudaMemoryInfo(device);
  return {static_cast<int64_t>(m.free_bytes), static_cast<int64_t>(m.total_bytes)};
#else
  MakeDevice(device);  // throws: this build has no such device
  return {};
#endif
}

}  // namespace m3::engine::backend
