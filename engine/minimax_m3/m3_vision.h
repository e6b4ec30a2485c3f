// The MiniMax-M3 VL vision path with the released model's semantics, as a graph over the M3Ops
// of a Device: patch embedding, pre-LN, the CLIP-style encoder with the 3D (t, h, w) rotary
// embedding and attention confined to one segment (an image, or at most
// vision_segment_max_frames temporal groups of a video), then the projector and the 2x2
// patch-merge MLP. One call encodes one segment (what the encoder cache stores).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "shared/safetensors.h"

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

// Encodes one segment's patches ([t*h*w, patch_dim] float32, finite) into merged features
// [t*h*w / merge^2, text_hidden]. When `captured` is given, appends "vision_tower_out"
// [t*h*w, vision_hidden] and "projector_out" (the merged features).
backend::DeviceTensor EncodeVisionSegment(backend::Device& device, backend::M3Ops& ops,
                                          const M3ModelWeights& w, const ModelConfig& c,
                                          const float* patches, const GridThw& segment,
                                          NamedTensors* captured);

}  // namespace m3::engine::minimax_m3
