// MaxRequestBytes: a generous upper bound on each field of a GenerateRequest that
// FromProto / ValidateRequest / the sequence's placeholder check let through.
#include "engine/server/message_limit.h"

#include <algorithm>
#include <climits>

namespace m3::engine::server {

int64_t MaxRequestBytes(const RunnerInfo& info, int64_t max_prompt_tokens) {
  const int64_t tokens = std::max<int64_t>(max_prompt_tokens, 1);
  // token_ids: packed int32 varints, at most 5 bytes for the non-negative ids validation
  // accepts (a negative one takes 10 but is refused).
  int64_t bytes = 5 * tokens;
  // stop_token_ids: FromProto takes at most vocab_size of them (5 bytes each).
  bytes += 5 * std::max<int64_t>(info.vocab_size, 0);
  if (info.patch_dim > 0) {
    // Media: each placeholder token is one prompt position and stands for merge^2 patch rows
    // exactly (SplitMedia requires h and w to be multiples of the merge size) and Sequence
    // checks the grid's placeholder count against the prompt's placeholders, so
    // all items together carry at most tokens * merge^2 rows of patch_dim values, 4 bytes each
    // at the widest dtype (F32). Every item needs at least one placeholder, so there are at
    // most `tokens` items; 128 bytes covers each one's framing (kind, grid, shape, dtype).
    const int64_t merge = std::max<int64_t>(info.spatial_merge_size, 1);
    const int64_t rows = tokens * merge * merge;
    if (rows > INT64_MAX / 4 / info.patch_dim) return INT_MAX;
    bytes += rows * info.patch_dim * 4 + 128 * tokens;
  }
  // request_id (<= 256 bytes), sampling scalars and field framing: 64 KiB is far above them.
  bytes += 64 << 10;
  return std::min<int64_t>(bytes, INT_MAX);
}

}  // namespace m3::engine::server
