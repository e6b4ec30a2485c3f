// MiniMax-M3 VL weights on a Device, loaded from the upstream checkpoint layout (names in
// docs/M3_REFERENCE.md; dense MLPs as the released `mlp.*` or transformers 5's
// `block_sparse_moe.*`; MTP layers skipped) with every shape checked against the config, the
// Linears in the format their tensors have (dense, MXFP8, NVFP4), fused for the graph:
// q/k/v (+ the MSA indexer's q/k) as one projection, gate/up as one matrix, the routed experts
// stacked [experts, 2 * inter, hidden] / [experts, hidden, inter] for grouped execution, and the
// vision q/k/v as one projection with one bias.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/device.h"
#include "engine/backend/m3_ops.h"
#include "engine/backend/quant_config.h"
#include "engine/backend/weight_uploader.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_shard_plan.h"
#include "shared/safetensors.h"

namespace m3::engine::minimax_m3 {

using backend::DeviceTensor;
using backend::LinearWeight;
using backend::LoadReport;
using backend::SharedPageRelease;

struct M3DecoderLayerWeights {
  bool sparse_attention = false;
  bool moe = false;
  DeviceTensor input_norm, post_attention_norm;  // [hidden]
  // [(q_heads + 2 kv_heads) head_dim (+ (index_heads + 1) index_dim), hidden]: rows of q, k, v,
  // then index q and index k on MSA layers.
  // The Linears are as the checkpoint holds them (dense, MXFP8 or NVFP4: linear_weight.h).
  LinearWeight qkv_proj;
  LinearWeight o_proj;  // [hidden, q_heads * head_dim]
  backend::QkNormWeights norms;
  LinearWeight mlp_gate_up, mlp_down;  // dense MLP: [2 I, hidden], [hidden, I]
  DeviceTensor router, router_bias;    // [experts, hidden], [experts] (never quantized)
  LinearWeight experts_gate_up;        // [experts, 2 I, hidden]
  LinearWeight experts_down;           // [experts, hidden, I]
  LinearWeight shared_gate_up, shared_down;
};

struct M3VisionLayerWeights {
  DeviceTensor ln1_w, ln1_b, ln2_w, ln2_b;
  DeviceTensor qkv_w, qkv_b;  // [3 Dv, Dv], [3 Dv]
  DeviceTensor out_w, out_b;
  DeviceTensor fc1_w, fc1_b, fc2_w, fc2_b;
};

struct M3ModelWeights {
  DeviceTensor embed_tokens;  // [vocab, hidden]
  LinearWeight lm_head;       // [vocab, hidden] (a vocab-split rank: its rows)
  DeviceTensor final_norm;    // [hidden]
  std::vector<M3DecoderLayerWeights> layers;

  DeviceTensor patch_embed;  // [vision_hidden, patch_dim] (the Conv3d kernel, flattened)
  DeviceTensor pre_ln_w, pre_ln_b;
  std::vector<M3VisionLayerWeights> vision_layers;
  DeviceTensor proj1_w, proj1_b, proj2_w, proj2_b;      // multi_modal_projector.linear_{1,2}
  DeviceTensor merge1_w, merge1_b, merge2_w, merge2_b;  // patch_merge_mlp.linear_{1,2}
};

// Checks the config's structural assumptions (kInvalidArgument naming the key).
void CheckM3Config(const ModelConfig& config);

// Validates the checkpoint (every weight a known layout, agreeing with the quantization config
// of the store's directory: kInvalidArgument naming the tensor before anything is uploaded),
// then loads and shape-checks every tensor onto `device`; fills `report`. With a plan of several
// ranks, the decoder layers are this rank's slices (m3_shard_plan.h); the embeddings, LM
// head, norms, routers and the vision tower are whole on every rank; `shared` (the group's)
// drops each source tensor's pages once every rank has read it.
M3ModelWeights LoadM3ModelWeights(const WeightStore& store, const ModelConfig& config,
                                  backend::Device& device, LoadReport& report,
                                  const ShardPlan* plan = nullptr,
                                  SharedPageRelease* shared = nullptr);

// Dummy weights (--load-format dummy): every tensor the config implies drawn by `device`, the
// Linears in the formats `quant` gives their modules; no file is read.
M3ModelWeights DrawM3DummyWeights(const ModelConfig& config, const backend::QuantConfig& quant,
                                  backend::Device& device, LoadReport& report,
                                  const ShardPlan* plan = nullptr);

}  // namespace m3::engine::minimax_m3
