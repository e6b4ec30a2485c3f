// Model: the one-sequence interface of the engine (prompt with its images / videos, then one
// token at a time), used by the offline `m3-engine logits / generate` and the golden tests. Its
// one implementation is the single-sequence driver over a ModelRunner
// (single_sequence_model.h); LoadModel (model_registry.h) builds it for a model directory. The
// serving runtime drives ModelRunner directly with many sequences per step.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shared/safetensors.h"

namespace m3::engine {

// Flat vision patches of one modality plus their (t, h, w) grids, as the gateway produces them.
struct VisionInput {
  std::vector<float> pixels;  // [rows, patch_dim]
  int64_t rows = 0;
  int64_t patch_dim = 0;
  std::vector<std::array<int64_t, 3>> grids;
};

struct ModelInputs {
  std::vector<int64_t> input_ids;
  std::optional<VisionInput> images;
  std::optional<VisionInput> videos;
};

// Intermediate tensors a caller may ask Prefill to keep (tests, debugging).
struct CaptureOptions {
  bool hidden_states = false;  // "hidden_states.i": input of layer i; the last after final norm
  bool block_indices = false;  // "block_indices.layerN": sparse-attention selections
  bool vision = false;         // "image.vision_tower_out", "image.projector_out", "video.*"
  bool all_logits = true;      // false: logits of the last position only
};

struct PrefillResult {
  std::vector<float> logits;  // [rows, vocab]
  int64_t rows = 0;
  NamedTensors captured;
};

// Per-request state (its KV pages, position). Opaque to callers.
class ModelSequence {
 public:
  virtual ~ModelSequence() = default;
  virtual int64_t length() const = 0;  // tokens processed so far
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string architecture() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> eos_token_ids() const = 0;
  // The most tokens a sequence may hold (prompt + generated); 0 when the config sets none.
  virtual int64_t max_context() const = 0;

  virtual std::unique_ptr<ModelSequence> NewSequence() const = 0;
  // Runs the prompt (with its images / videos) on an empty sequence, filling its caches.
  // Throws m3::Error on invalid inputs (ids out of range, placeholder / grid mismatches).
  virtual PrefillResult Prefill(ModelSequence& seq, const ModelInputs& inputs,
                                const CaptureOptions& capture) const = 0;
  // Appends one token to a prefilled sequence; returns its next-token logits [vocab].
  virtual std::vector<float> Decode(ModelSequence& seq, int64_t token) const = 0;
};

}  // namespace m3::engine
