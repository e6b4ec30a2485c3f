// MoE routing with sigmoid scores (MiniMax-M3): s = sigmoid(logit); choose the top-k experts by
// s + correction_bias; weights = s of the chosen, divided by their sum. Ties keep the lower
// expert index.
#pragma once

#include <cstdint>

namespace m3::kernels::cpu {

// logits [tokens, experts], bias [experts] (may be null); ids/weights [tokens, topk].
void MoeRouteSigmoid(const float* logits, int64_t tokens, int64_t experts, const float* bias,
                     int64_t topk, int64_t* ids, float* weights);

}  // namespace m3::kernels::cpu
