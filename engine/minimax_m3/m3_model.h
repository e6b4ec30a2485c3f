// MiniMax-M3 VL as an engine Model on the CPU backend: embeddings, vision features scattered
// into the image / video placeholder rows (images first, then videos), the decoder, LM head.
#pragma once

#include <memory>
#include <string>

#include "engine/model.h"

namespace m3::engine::minimax_m3 {

// Loads config.json and the weights of DIR (mmap; converted to float32).
std::unique_ptr<Model> LoadMiniMaxM3(const std::string& model_dir);

}  // namespace m3::engine::minimax_m3
