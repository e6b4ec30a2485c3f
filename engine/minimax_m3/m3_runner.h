// MiniMax-M3 VL as a ModelRunner: the weights on a Device, the decoder graph (M3Ops) over the paged
// KV storage, and the per-segment vision encoder.
#pragma once

#include <memory>
#include <string>

#include "engine/step/model_runner.h"

namespace m3::engine::minimax_m3 {

// Loads config.json (+ generation_config.json) and the weights of DIR onto the device that
// options.device names.
std::unique_ptr<ModelRunner> LoadMiniMaxM3Runner(const std::string& model_dir,
                                                 const RunnerOptions& options);

}  // namespace m3::engine::minimax_m3
