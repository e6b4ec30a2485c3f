// ExpectedModel: what the gateway's model directory says an engine must serve (vocabulary
// size, special token ids, placeholder token ids), and the check of an engine's ModelInfo
// against it: an engine of another model would turn the gateway's token ids into garbage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine.pb.h"

namespace m3::engine_client {

struct ExpectedModel {
  int64_t vocab_size = 0;            // config.json (text_config.vocab_size)
  int64_t tokenizer_vocab_size = 0;  // ids the gateway's tokenizer can produce; 0: unchecked
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
};

// From DIR/config.json and generation_config.json. Throws m3::Error naming the file.
ExpectedModel LoadExpectedModel(const std::string& model_dir, int64_t tokenizer_vocab_size);

// Empty when the engine serves a compatible model, else a message naming every difference.
std::string ModelMismatch(const ExpectedModel& expected, const engine::v1::ModelInfoResponse& info);

}  // namespace m3::engine_client
