// UploadStepMetadata: a forward step's batch layout (positions, query starts, context lengths,
// block tables, slots) and its rotary rows put on a device as StepMetadata, with the host-side
// maxima the kernels' launch decisions use. What every device's PrepareStep does, and the
// host-side rotary rows of Device::PrepareStepFromPositions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/device.h"

namespace m3::engine::backend {

StepMetadata UploadStepMetadata(Device& dev, const ForwardBatch& batch, int64_t page_size,
                                std::span<const float> rope_cos, std::span<const float> rope_sin,
                                int64_t rotary_dim);

// The layout alone (rope_cos / rope_sin left empty), for devices that make the rotary rows
// themselves.
StepMetadata UploadStepLayout(Device& dev, const ForwardBatch& batch, int64_t page_size);

// The rotary rows of the batch's positions on the host's threads (kernels/cpu/rope.h's
// RopeCosSin per row): cos / sin resized to [rows, 2 * inv_freq.size()].
void HostRopeTables(const ForwardBatch& batch, std::span<const float> inv_freq,
                    std::vector<float>& cos, std::vector<float>& sin);

}  // namespace m3::engine::backend
