// `m3-engine quantize`: writes a MiniMax-M3 checkpoint (float: bf16 / f16 / f32) in the
// layouts the released quantized checkpoints use, so that every loader path can be tested on a
// trained model:
//  - mxfp8: MiniMax's MXFP8 release (config.json quantization_config quant_method mxfp8,
//    `weight_scale_inv` U8 E8M0 per 32): every language-model Linear but the router and the
//    ignored lm_head;
//  - nvfp4: the community ModelOpt NVFP4 layout (hf_quant_config.json + quantization_config
//    with `ignore`): routed experts and the dense / shared `down_proj` NVFP4, the rest as is;
//  - mixed: NVIDIA's ModelOpt MIXED_PRECISION (`quantized_layers`): MXFP8 Linears, NVFP4
//    routed experts;
//  - with --dequantize, the same quantized values written back as float32 (no quantization
//    config): the reference a quantized checkpoint's logits are compared with.
// Output: shards of at most --max-shard-size with model.safetensors.index.json, the model
// directory's other files copied (config.json with the quantization config). --mlp-names
// renames the dense layers' MLP to the released `mlp.*` or transformers 5's
// `block_sparse_moe.*`.
#pragma once

#include <string>
#include <vector>

namespace m3::engine::cli {

int RunQuantize(const std::vector<std::string>& args);

}  // namespace m3::engine::cli
