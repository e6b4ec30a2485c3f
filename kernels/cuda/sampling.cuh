// Next-token sampling of many logits rows on the GPU: the device twin of the host BatchSampler
// (engine/step/batch_sampler.h, which the CPU device's SampleRows runs). Per row: logit_bias,
// penalties over the row's unique history tokens, min_tokens masks, the allowed-token bitmask
// (a grammar's), greedy, temperature, min-p, top-k,
// top-p, the seeded draw CounterUniform(seed, counter) computed on the device with the same bits
// as engine/step/counter_rng.h (the draw walks the kept tokens in ascending id), the chosen
// token's logprob and the top-n logprobs of the raw distribution. One thread block per row;
// candidate sets come from radix selection (histograms of 8-bit key digits), never a sort of the
// vocabulary. Launch configuration depends on the row count only; nothing is allocated.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_util.cuh"

namespace m3::kernels::cuda {

inline constexpr int kMaxTopLogprobs = 20;
// Vocabularies up to 2^20 tokens: the draw's weights are 2^44-scaled integers summed in 64 bits.
inline constexpr int64_t kMaxSamplingVocab = int64_t{1} << 20;

// One row's parameters as the host resolved them (log and reciprocal taken on the host, so the
// device compares against the host's exact values).
struct SampleRowParams {
  double inv_temperature = 1.0;     // 1 / temperature (unused when greedy)
  double log_min_p = 0.0;           // log(min_p); min_p_on == 0: off
  double top_p = 1.0;               // >= 1: off
  double repetition_penalty = 1.0;  // 1: off; applies to every history token
  double presence_penalty = 0.0;    // to history tokens with output_count > 0
  double frequency_penalty = 0.0;   // times output_count
  uint64_t seed = 0;                // the draw is CounterUniform(seed, counter)
  uint64_t counter = 0;             // tokens generated so far
  int32_t top_k = 0;                // <= 0: off
  int32_t greedy = 0;               // argmax of the processed logits
  int32_t min_p_on = 0;
  int32_t history_begin = 0;  // unique history tokens [begin, begin + count) of the arrays
  int32_t history_count = 0;
  int32_t mask_begin = 0;  // ids masked to -inf (min_tokens): [begin, begin + count)
  int32_t mask_count = 0;
  int32_t logprobs = -1;   // < 0: none; 0: the chosen token's; n: plus the top n
  int32_t bias_begin = 0;  // logit_bias entries [begin, begin + count) (unique ids)
  int32_t bias_count = 0;
  int32_t allowed_row = -1;  // row of the allowed-token bitmask; < 0: every token allowed
  int32_t pad = 0;
};

struct SampleRowResult {
  int32_t token;
  float logprob;
  int32_t top_ids[kMaxTopLogprobs];  // most likely first
  float top_logprobs[kMaxTopLogprobs];
};

// logits f32 [rows, vocab]; params [rows]; history_tokens / history_output_counts: each row's
// unique prompt-or-output tokens and their counts among the output tokens; mask_tokens: the ids
// each row masks; bias_tokens / bias_values: the rows' logit_bias entries; allowed: bitmask rows
// of ceil(vocab / 32) words (bit t % 32 of word t / 32: token t allowed), indexed by
// params.allowed_row (null when no row has one); work f32 [rows, vocab] scratch; out [rows]. All
// device pointers. Throws std::runtime_error for a vocabulary outside (0, kMaxSamplingVocab] or
// a failed launch.
void SampleRows(const float* logits, int64_t rows, int64_t vocab, const SampleRowParams* params,
                const int32_t* history_tokens, const int32_t* history_output_counts,
                const int32_t* mask_tokens, const int32_t* bias_tokens, const float* bias_values,
                const uint32_t* allowed, float* work, SampleRowResult* out, cudaStream_t stream);

// out[i] = CounterUniform(seeds[i], counters[i]) computed by the device code (device pointers).
void CounterUniforms(const uint64_t* seeds, const uint64_t* counters, int64_t n, double* out,
                     cudaStream_t stream);

}  // namespace m3::kernels::cuda
