// UploadStepMetadata: a forward step's batch layout (positions, query starts, context lengths,
// block tables, slots) and its rotary rows put on a backend as StepMetadata, with the host-side
// maxima the kernels' launch decisions use. What every backend's PrepareStep does.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend/backend.h"

namespace m3::engine::backend {

StepMetadata UploadStepMetadata(Backend& be, const ForwardBatch& batch, int64_t page_size,
                                std::span<const float> rope_cos, std::span<const float> rope_sin,
                                int64_t rotary_dim);

}  // namespace m3::engine::backend
