// MoE routing with sigmoid scores (MiniMax-M3): s = sigmoid(logit); choose the top-k experts by
// s + correction_bias; weights = s of the chosen, divided by their sum. Ties keep the lower
// expert index. Under expert parallelism a rank holds experts [local_first, local_first +
// local_count): a chosen expert there is written as its index in that range, any other as -1
// (another rank computes it; the grouped experts skip it). Its weight is kept either way.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// logits [tokens, experts], bias [experts] (may be null); ids/weights [tokens, topk].
// local_count < 0: every expert is local.
void MoeRouteSigmoid(const float* logits, int64_t tokens, int64_t experts, const float* bias,
                     int64_t topk, int64_t* ids, float* weights, int64_t local_first = 0,
                     int64_t local_count = -1);

}  // namespace m3::kernels::cpu
