// The GPU memory a MiniMax-M3 rank's weights will take, estimated before anything is uploaded
// (from the config, the rank's ShardPlan and each Linear's storage format), and the refusal of
// a model that cannot fit: a clear kResourceExhausted with the numbers per GPU at load, rather
// than an allocation failing halfway through the weights (or, later, mid-request).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/linear_weight.h"
#include "engine/backend/quant_config.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "shared/safetensors.h"

namespace m3::engine::minimax_m3 {

// The storage format of the Linear `module` (its name without ".weight", e.g.
// "language_model.model.layers.3.block_sparse_moe.experts.7.w1"; dense MLPs are asked by their
// released names, "...layers.N.mlp.{gate,up,down}_proj"); nullopt when unknown.
using LinearFormatOf = std::function<std::optional<backend::WeightFormat>(const std::string&)>;

// Bytes a GPU rank holds for its weights: matrices bf16 (2 bytes an element), vectors f32,
// MXFP8 1 + 1/32 bytes an element, NVFP4 1/2 + 1/16 and a float per row; the rank's slices as
// m3_model_weights.h loads them (fused parts in different formats dense). A lower bound where a
// device holds a format dequantized.
// nullopt when format_of does not know some Linear.
std::optional<int64_t> EstimateRankWeightBytes(const ModelConfig& config, const ShardPlan& plan,
                                               const LinearFormatOf& format_of);

// Formats as a checkpoint stores them: a U8 `weight` is NVFP4, F8_E4M3 MXFP8, a float dense;
// dense MLPs are looked up under block_sparse_moe.* too (transformers 5's names). The store
// must outlive the function.
LinearFormatOf FormatsFromStore(const WeightStore& store);
// Formats as a quantization config gives them (dummy weights); `quant` must outlive it.
LinearFormatOf FormatsFromQuantConfig(const backend::QuantConfig& quant);

// Refuses (kResourceExhausted) when some rank's estimate exceeds the free memory of its GPU,
// naming every rank's need and its GPU's free and total memory. Devices without a memory
// report (the CPU) are not checked.
void CheckWeightsFit(const std::vector<std::string>& devices,
                     const std::vector<int64_t>& rank_bytes);
// The same from the ranks' plans (devices[r] holds plans[r]); nothing is checked when
// format_of does not know every Linear.
void CheckWeightsFit(const ModelConfig& config, const std::vector<ShardPlan>& plans,
                     const std::vector<std::string>& devices, const LinearFormatOf& format_of);

}  // namespace m3::engine::minimax_m3
