// ValidateRequest: per-field checks with messages that say which item and value is wrong.
#include "engine/runtime/request_validation.h"

#include <cmath>
#include <string>

#include "shared/error.h"

namespace m3::engine {

void ValidateRequest(const EngineRequest& r, const RunnerInfo& info, int64_t max_prompt_tokens) {
  Require(!r.prompt.empty(), ErrorCode::kInvalidArgument, "token_ids is empty");
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  Require(n <= max_prompt_tokens, ErrorCode::kInvalidArgument,
          "the prompt has " + std::to_string(n) + " tokens; this engine takes at most " +
              std::to_string(max_prompt_tokens) + " (context " +
              std::to_string(info.max_model_len) + ", one position kept for the answer)");
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = r.prompt[static_cast<size_t>(i)];
    Require(t >= 0 && t < info.vocab_size, ErrorCode::kInvalidArgument,
            "token_ids[" + std::to_string(i) + "] = " + std::to_string(t) +
                " is outside the vocabulary [0, " + std::to_string(info.vocab_size) + ")");
  }
  int counts[2] = {0, 0};
  for (const MediaItem& m : r.media) {
    const std::string what =
        std::string(m.video ? "video " : "image ") + std::to_string(counts[m.video]++);
    for (int k = 0; k < 3; ++k)
      Require(GridValueInBounds(m.grid_thw[k]), ErrorCode::kInvalidArgument,
              what + ": grid_thw values must be in [1, " + std::to_string(kMaxGridValue) +
                  "], got (" + std::to_string(m.grid_thw[0]) + ", " +
                  std::to_string(m.grid_thw[1]) + ", " + std::to_string(m.grid_thw[2]) + ")");
    Require(m.patch_dim == info.patch_dim, ErrorCode::kInvalidArgument,
            what + ": patches have " + std::to_string(m.patch_dim) + " values per row; the model " +
                "takes " + std::to_string(info.patch_dim));
    // Rows (up to 2^60) against the rows sent: rows x patch_dim could wrap around to the sent
    // size.
    const int64_t rows = m.grid_thw[0] * m.grid_thw[1] * m.grid_thw[2];
    const auto sent = static_cast<int64_t>(m.patches.size());
    Require(sent % m.patch_dim == 0 && rows == sent / m.patch_dim, ErrorCode::kInvalidArgument,
            what + ": grid (" + std::to_string(m.grid_thw[0]) + ", " +
                std::to_string(m.grid_thw[1]) + ", " + std::to_string(m.grid_thw[2]) + ") needs " +
                std::to_string(rows) + " patch rows but " +
                std::to_string(m.patches.size() / static_cast<size_t>(m.patch_dim)) + " were sent");
    for (size_t i = 0; i < m.patches.size(); ++i)
      Require(std::isfinite(m.patches[i]), ErrorCode::kInvalidArgument,
              what + ": pixel value " + std::to_string(i) + " is not finite (" +
                  std::to_string(m.patches[i]) + ")");
  }
}

}  // namespace m3::engine
