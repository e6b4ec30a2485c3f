// The verify forward of speculative decoding on the demo model, on one device: a sequence
// carrying its last token and k drafts as 1 + k query rows (logits at each) beside a plain
// decode in the same batch, and the same positions decoded one at a time; for the CPU test
// (speculative_test) and the GPU one (cuda_test), which compare them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/safetensors.h"
#include "tests/engine/selection_run.h"

namespace m3::test {

// A demo chat prompt and 40 tokens of the demo model's greedy answer (76 tokens: five MSA
// blocks of 16, more than the three it selects, so selection matters for the last rows).
extern const std::vector<int32_t> kVerifyContext;
constexpr int32_t kVerifyDrafts = 3;

struct VerifyRun {
  std::vector<std::vector<float>> verify;      // the verify sequence's 1 + k rows
  std::vector<float> decode;                   // the plain decode beside it
  std::vector<std::vector<float>> sequential;  // the same positions decoded one at a time
  SelectionRun selections;                     // the verify step's block_indices.layerN
};

// On `device`: seq A prefilled to its last token (decoded in the verify step), seq B to
// kVerifyContext minus 1 + k (verified: 1 + k rows), seq C the same as B then decoded row by
// row. The verify step's MSA selections are captured.
VerifyRun RunVerify(const std::string& device);

int32_t Argmax(const std::vector<float>& v);

// A uniform verify step (three sequences of 1 + k rows each, every row's logits) on a decoder
// graph of `device` with decode buckets on or off (graphs: recorded where the device can), after
// a prefill of the three; its logits [rows, vocab] and how many steps ran at a bucket's shape.
struct BucketRun {
  std::vector<float> logits;
  int64_t bucket_steps = 0;
  int64_t recorded = 0;
  NamedTensors hidden;  // the verify step's captured inputs of layers 1, 2, 3 (capture_hidden)
};
// capture_hidden: the verify step captures the inputs of layers 1, 2 and 3 (an EAGLE-3 draft's).
BucketRun RunUniformVerify(const std::string& device, bool buckets, bool graphs,
                           bool capture_hidden = false);

}  // namespace m3::test
