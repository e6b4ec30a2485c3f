// The MiniMax-M3 VL vision path on the CPU, with the released model's semantics: patch
// embedding, pre-LN, the CLIP-style encoder with the 3D (t, h, w) rotary embedding and attention
// confined to one segment (an image, or at most vision_segment_max_frames temporal groups of a
// video), then the projector and the 2x2 patch-merge MLP.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/minimax_m3/m3_weights.h"
#include "engine/model.h"
#include "shared/model_config.h"

namespace m3::engine::minimax_m3 {

using GridThw = std::array<int64_t, 3>;

// The independently encoded segments of a modality's grids, in patch order: every image is one
// segment; a video of t temporal groups is cut into runs of at most max_frames groups (0 = no
// cut), each with its temporal positions restarting at 0.
std::vector<GridThw> VisionSegments(const std::vector<GridThw>& grids, int64_t max_frames);

// Per-axis rotary width d = 2 * ((2 * (head_dim / 2) / 3) / 2): t, h and w each rotate d
// channels, 3d in all; the rest of the head passes through.
int64_t VisionRotaryAxisDim(int64_t head_dim);

// cos/sin rows ([t*h*w, 3d] each) of one segment, patches in the processor's order (t, h-block,
// w-block, mh, mw): angles [t * inv | h * inv | w * inv], duplicated as [angles, angles].
void VisionRotaryTable(const VisionConfig& v, const GridThw& segment, std::vector<float>& cos,
                       std::vector<float>& sin);

// The tower on one segment's patches ([t*h*w, patch_dim]); returns [t*h*w, vision_hidden].
std::vector<float> EncodeVisionSegment(const M3Weights& w, const VisionConfig& v,
                                       const float* patches, const GridThw& segment);

// The tower over all patches of a modality: each segment encoded alone, outputs concatenated.
std::vector<float> RunVisionTower(const M3Weights& w, const ModelConfig& c, const VisionInput& in);

// [rows, vision_hidden] -> [rows / merge^2, text_hidden].
std::vector<float> ProjectAndMerge(const M3Weights& w, const ModelConfig& c,
                                   const std::vector<float>& features, int64_t rows);

}  // namespace m3::engine::minimax_m3
