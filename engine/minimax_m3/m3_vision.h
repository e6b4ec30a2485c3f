// The MiniMax-M3 VL vision path on the CPU: patch embedding, pre-LN, the CLIP-style encoder with
// the axial 2D rotary embedding, then the projector and the 2x2 patch-merge MLP.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/minimax_m3/m3_weights.h"
#include "engine/model.h"
#include "shared/model_config.h"

namespace m3::engine::minimax_m3 {

// Per-patch cos/sin rows of the vision rotary embedding ([rows, rot] each), for patches in the
// gateway's order (t, h-block, w-block, mh, mw) of each grid, grids concatenated. This is the
// one place that mirrors the reference's position-id layout and column choice.
void VisionRotaryTable(const VisionConfig& v, const std::vector<std::array<int64_t, 3>>& grids,
                       std::vector<float>& cos, std::vector<float>& sin, int64_t& rot);

// All patches of one call form one attention sequence, as in the reference. Returns
// [rows, vision_hidden].
std::vector<float> RunVisionTower(const M3Weights& w, const ModelConfig& c, const VisionInput& in);

// [rows, vision_hidden] -> [rows / merge^2, text_hidden].
std::vector<float> ProjectAndMerge(const M3Weights& w, const ModelConfig& c,
                                   const std::vector<float>& features, int64_t rows);

}  // namespace m3::engine::minimax_m3
