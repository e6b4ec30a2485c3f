// MakeM3Ops: the MiniMax-M3 op set implemented on a given device (the CPU's or a CUDA GPU's).
#pragma once

#include <memory>

#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"

namespace m3::engine::backend {

// The ops keep a reference to `device`, which must outlive them. Throws kUnsupported for a
// device with no implementation of these ops.
std::unique_ptr<M3Ops> MakeM3Ops(Device& device);

}  // namespace m3::engine::backend
