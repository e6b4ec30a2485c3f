// Sigmoid MoE routing on the GPU, the twin of kernels/cpu/moe_routing.h: per token, the top-k
// experts by sigmoid(logit) + bias (ties to the lower expert), weights = the chosen sigmoids
// normalized to sum 1, all in f32. Logits and weights may be f32 or bf16 arrays. Ids are
// written rank-local: a chosen expert in [local_first, local_first + local_count) as its index
// there, any other as -1 (expert parallelism: another rank's); local_count < 0: all local.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

void MoeRouteSigmoid(const void* logits, ElemType logits_t, int64_t tokens, int64_t experts,
                     const float* bias, int64_t topk, int32_t* ids, void* weights,
                     ElemType weights_t, cudaStream_t stream, int64_t local_first = 0,
                     int64_t local_count = -1);

}  // namespace m3::kernels::cuda
