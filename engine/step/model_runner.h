// ModelRunner: what the serving runtime (scheduler, caches, engine loop) needs from a loaded model
// on one backend, and the options a model is loaded with. Below both the runtime, which drives
// it, and the models that implement it (engine/minimax_m3/, engine/parallel/); LoadModelRunner
// (engine/model_registry.h) builds one. It owns the weights and the paged KV storage (per layer K,
// V and, for MSA layers, index keys, all addressed through the same block table); the runtime owns
// which pages belong to whom (kv_cache_manager), what runs in a step (scheduler) and sampling.
//
// Threading: one engine thread calls Encode / Execute; the runner parallelizes inside. info(),
// SplitMedia and KvBytesPerPage are const and may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/step/batch_sampler.h"
#include "engine/step/encoder_output.h"
#include "engine/step/forward_batch.h"
#include "shared/safetensors.h"

namespace m3::engine {

// A part of one image / video item that is encoded on its own. Patches are the item's rows in
// the gateway's order; a segment is a contiguous run of them.
struct MediaSegment {
  int64_t patch_offset = 0;  // first patch row of the item in this segment
  int64_t patch_rows = 0;
  std::array<int64_t, 3> grid_thw{};  // the segment's own grid (t = its temporal groups)
  int64_t tokens = 0;                 // placeholder tokens it fills = its feature rows
  int64_t token_offset = 0;           // first placeholder (of the item) it fills
};

struct RunnerInfo {
  std::string architecture;  // config.json model_type
  std::string dtype;         // activations / weights as the backend runs them ("float32")
  std::string device;        // "cpu", "cuda:0", ...
  int64_t weight_bytes = 0;  // what the loaded weights take on the device (memory planning)
  // The decoder's K/V pages as stored: dtype, or "F8_E4M3" (RunnerOptions::fp8_kv_cache).
  std::string kv_cache_dtype;
  // Each device holding a part of the model (one per rank of a parallel runner) and the bytes
  // of weights it holds: the KV cache is sized and reported per device.
  struct DeviceWeights {
    std::string device;
    int64_t weight_bytes = 0;
  };
  std::vector<DeviceWeights> ranks;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t max_model_len = 0;  // max_position_embeddings: positions must stay below it
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  // Vision input geometry (what the gateway's preprocessing must produce).
  int64_t patch_dim = 0;  // channels * temporal_patch_size * patch_size^2
  int64_t patch_size = 0;
  int64_t temporal_patch_size = 0;
  int64_t spatial_merge_size = 0;
  int64_t vision_segment_max_frames = 0;  // 0: a video is one segment
  // Paged KV: page_size must divide msa_block_size (so a selected key block is whole pages);
  // 0 when the model has no MSA layers (any page size works).
  int64_t msa_block_size = 0;
};

// Intermediate tensors a caller may ask the next Encode / Execute to keep (tests, debugging,
// `m3-engine logits --capture`). Names: "hidden_states.i" (input of decoder layer i, the last
// one after the final norm; rows of the step), "block_indices.layerN" ([kv_groups, rows,
// topk_blocks] selected MSA blocks, -1 padded), "vision_tower_out" / "projector_out" (Encode).
struct CaptureRequest {
  bool hidden_states = false;
  bool block_indices = false;
  bool vision = false;
  NamedTensors* out = nullptr;  // appended to; null: capture nothing
  // hidden_states of these layers only (speculative drafts read a few); empty: every layer.
  std::vector<int64_t> hidden_state_layers = {};
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const RunnerInfo& info() const = 0;

  // How one image (video = false) or video item of grid (t, h, w) splits into independently
  // encoded segments: an image is one; a video is cut into runs of at most
  // vision_segment_max_frames temporal groups. Throws kInvalidArgument on a bad grid (non
  // positive, not divisible by the merge size, implausibly large).
  virtual std::vector<MediaSegment> SplitMedia(bool video,
                                               std::array<int64_t, 3> grid_thw) const = 0;

  // Encodes one segment: vision tower + projector + merge. `patches` holds the segment's own
  // rows [segment.patch_rows, patch_dim] (float32). Throws kInvalidArgument on non-finite pixels.
  virtual std::shared_ptr<const EncoderOutput> Encode(const float* patches,
                                                      const MediaSegment& segment) = 0;

  // Bytes one page of `page_size` tokens takes over all layers (K, V and index keys).
  virtual int64_t KvBytesPerPage(int64_t page_size) const = 0;
  // (Re)allocates the paged KV storage: pages [0, num_pages) of page_size tokens. Throws
  // kInvalidArgument when page_size does not divide msa_block_size. Contents start undefined.
  virtual void AllocateKvCache(int64_t num_pages, int64_t page_size) = 0;
  virtual int64_t num_pages() const = 0;
  virtual int64_t page_size() const = 0;

  // Runs one forward step: embeds the rows (media spans overwrite theirs), writes K, V (and
  // index keys) at slot_mapping, attends through the block tables (MSA layers select key blocks
  // per KV group), and returns logits [logits_rows.size(), vocab] float32 in `logits`.
  // Throws kInvalidArgument on a malformed batch (ids outside the vocabulary, positions beyond
  // max_model_len, inconsistent sizes, page ids outside the cache).
  virtual void Execute(const ForwardBatch& batch, std::vector<float>& logits) = 0;

  // Execute, then the next token of each logits row i with rows[i] (rows.size() ==
  // batch.logits_rows.size()), as BatchSampler picks it. Runners whose logits live on a device
  // override it to sample there (Device::SampleRows), downloading only tokens and logprobs;
  // this default samples Execute's logits on the host.
  virtual void ExecuteAndSample(const ForwardBatch& batch, std::span<const SampleRow> rows,
                                std::vector<SampledToken>& out) {
    Execute(batch, host_logits_);
    if (!host_sampler_ || host_sampler_->vocab() != info().vocab_size)
      host_sampler_ = std::make_unique<BatchSampler>(info().vocab_size);
    host_sampler_->Sample(host_logits_.data(), rows, out);
  }

  // Applies to the following calls until reset with an empty request.
  virtual void SetCapture(const CaptureRequest& capture) = 0;

 private:
  // The default ExecuteAndSample's vocabulary-sized buffers, kept between steps (a runner is
  // stepped by one thread at a time).
  std::vector<float> host_logits_;
  std::unique_ptr<BatchSampler> host_sampler_;
};

struct RunnerOptions {
  // The backend: "cpu", or "cuda" / "cuda:N" (GPU N; bf16 weights and activations) in builds
  // with the CUDA backend. Loading throws kUnsupported for a device this build lacks or a GPU it
  // has no code for, kUnavailable when no CUDA driver / GPU is usable, kResourceExhausted when
  // the weights do not fit in GPU memory.
  std::string device = "cpu";
  // The scheduler's step limits, which the runner sizes its preallocated step workspace and its
  // CUDA graph buckets for (a larger step still runs, allocating what it needs).
  int64_t max_num_seqs = 64;
  int64_t max_batched_tokens = 2048;
  // Logits rows a step may want per sequence: 1 + the speculative drafts verified (a verify
  // step samples every row), for sizing the logits and sampling buffers.
  int64_t max_logits_per_seq = 1;
  // Decoder-layer inputs a speculative draft reads each step (EAGLE-3: 3; CaptureRequest::
  // hidden_state_layers): GPU runners keep them inside replayed decode graphs.
  int64_t draft_hidden_layers = 0;
  // GPU backends: decode-only steps replay CUDA graphs recorded per (rows, block-table width)
  // bucket; other steps run op by op. Off: decode-only steps run op by op at the same bucket
  // shapes (padded rows, tables as wide as the bucket), so the results are the same either way.
  bool cuda_graphs = true;
  // MSA index keys cached as FP8 e4m3 with one float32 scale per key (kernels/cpu/
  // msa_index_fp8.h) instead of the activation dtype: the decode index scan reads half the
  // bytes of bf16 keys, and the KV pages take fewer bytes. Selections can differ from the
  // unquantized keys' where block scores lie within the FP8 rounding of each other. CUDA
  // backend: index head_dim 128 and MSA block 128 (the released model's) only.
  bool fp8_index_keys = false;
  // The decoder's K and V pages stored as FP8 e4m3 codes with one float32 scale per
  // (slot, kv head) vector, quantized when written (scale = max|x| / 448, as the FP8 index
  // keys) and dequantized by the attention as it loads them, instead of the activation dtype:
  // about half the bytes per page on a GPU, so a memory budget holds about twice the pages
  // (`--kv-cache-dtype fp8`).
  bool fp8_kv_cache = false;
  // Tensor / expert parallelism (engine/minimax_m3/m3_shard_plan.h): the model runs on
  // max(tensor_parallel, expert_parallel) ranks, each 1 or that size; ranks are threads of this
  // process, on the CPU backend or on GPUs device, device + 1, ... ("cuda" = "cuda:0"). Loading
  // throws kInvalidArgument when the sizes do not divide the model's heads / experts /
  // intermediates, naming them.
  int tensor_parallel = 1;
  int expert_parallel = 1;
  // Dummy weights (`--load-format dummy`, vLLM's name): no safetensors are read; every tensor
  // the model directory's config.json (and its quantization config) describes is drawn on the
  // device, the Linears in the formats the quantization config gives them, for serving and
  // timing a model without its files. Seeds come from the tensor names (whole tensors agree
  // across ranks; each rank draws its own slices).
  bool dummy_weights = false;
  // GPU ranks' all-reduces (engine/parallel/nccl_communicator.h, AllReduceMode): "auto" (the
  // one-shot peer kernels over NVLink for decode-sized messages where the GPUs have peer access,
  // NCCL otherwise), "custom" (the same, an error without peer access) or "nccl" (NCCL only).
  std::string all_reduce = "auto";
};

}  // namespace m3::engine
