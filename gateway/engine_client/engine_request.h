// The GenerateRequest the gateway sends an engine: prompt ids, each media item's patch
// tensor and grid (F32, or BF16 when the engine prefers it: half the bytes on the wire), and
// the request's sampling fields with the completion budget resolved against the context.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine.pb.h"
#include "gateway/openai/sampling_request.h"
#include "shared/tensor.h"

namespace m3::engine_client {

struct EngineMedia {
  bool video = false;
  const HostTensor* pixel_values = nullptr;  // F32 [patches, patch_dim]; must outlive the call
  std::array<int64_t, 3> grid_thw{};
  int64_t placeholder_tokens = 0;
};

// `pixel_dtype`: "F32" or "BF16" (ModelInfo's preferred_pixel_dtype). Throws
// m3::Error(kInvalidArgument) for another dtype or pixels that are not F32 [N, D].
engine::v1::GenerateRequest BuildGenerateRequest(std::string request_id,
                                                 std::span<const int32_t> prompt_ids,
                                                 std::span<const EngineMedia> media,
                                                 const openai::SamplingRequest& sampling,
                                                 int64_t max_tokens, std::string_view pixel_dtype);

}  // namespace m3::engine_client
