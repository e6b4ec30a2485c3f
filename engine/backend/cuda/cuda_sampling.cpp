// CudaSampleRows: host packing for kernels/cuda/sampling (logit_bias entries and the rows'
// allowed-token bitmasks ride along: one upload each). History tokens are deduplicated here
// with a vocabulary-sized scratch (O(history) per penalized row), so the kernel applies each
// penalty once per token without atomics; rows without penalties upload no history at all.
#include "engine/backend/cuda/cuda_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cuda/sampling.cuh"
#include "shared/error.h"

namespace m3::engine::backend {
namespace {

namespace k = m3::kernels::cuda;

// A byte array uploaded as int32 words (the backend moves integer tensors as they are).
DeviceTensor UploadWords(Device& be, const void* data, size_t bytes) {
  const int64_t words = std::max<int64_t>(static_cast<int64_t>((bytes + 3) / 4), 1);
  DeviceTensor t = be.Alloc(DType::kI32, {words});
  if (bytes > 0) {
    std::vector<int32_t> padded(static_cast<size_t>(words), 0);
    std::memcpy(padded.data(), data, bytes);
    be.Upload(padded.data(), t);
  }
  return t;
}

}  // namespace

void CudaSampleRows(Device& be, cudaStream_t stream, const DeviceTensor& logits,
                    std::span<const SampleRow> rows, std::vector<SampledToken>& out) {
  const int64_t n = static_cast<int64_t>(rows.size());
  Require(logits.dtype == DType::kF32 && logits.shape.size() == 2 && logits.shape[0] == n,
          ErrorCode::kInternal, "cuda backend: SampleRows: logits must be f32 [rows, vocab]");
  out.assign(static_cast<size_t>(n), SampledToken{});
  if (n == 0) return;
  const int64_t V = logits.shape[1];
  Require(V > 0 && V <= k::kMaxSamplingVocab, ErrorCode::kInternal,
          "cuda backend: SampleRows: vocabulary of " + std::to_string(V) +
              " tokens is beyond the device sampler's " + std::to_string(k::kMaxSamplingVocab));

  // Per-thread scratch: the engine thread samples; its size follows the vocabulary.
  thread_local std::vector<int32_t> counts;
  thread_local std::vector<uint8_t> seen;
  if (static_cast<int64_t>(counts.size()) != V) {
    counts.assign(static_cast<size_t>(V), 0);
    seen.assign(static_cast<size_t>(V), 0);
  }
  std::vector<k::SampleRowParams> params(static_cast<size_t>(n));
  std::vector<int32_t> hist_tok, hist_cnt, mask, bias_tok;
  std::vector<float> bias_val;
  std::vector<uint32_t> allowed;  // the masked rows' bitmasks, packed
  const int64_t words = (V + 31) / 32;
  int32_t allowed_rows = 0;
  for (int64_t r = 0; r < n; ++r) {
    const SamplingParams& p = *rows[r].params;
    k::SampleRowParams& q = params[static_cast<size_t>(r)];
    q.inv_temperature = p.greedy() ? 1.0 : 1.0 / p.temperature;
    q.min_p_on = p.min_p > 0 ? 1 : 0;
    q.log_min_p = p.min_p > 0 ? std::log(p.min_p) : 0.0;
    q.top_p = p.top_p;
    q.repetition_penalty = p.repetition_penalty;
    q.presence_penalty = p.presence_penalty;
    q.frequency_penalty = p.frequency_penalty;
    q.seed = p.seed;
    q.counter = rows[r].output.size();
    q.top_k =
        static_cast<int32_t>(std::clamp<int64_t>(p.top_k, 0, std::numeric_limits<int32_t>::max()));
    q.greedy = p.greedy() ? 1 : 0;
    q.logprobs = p.return_logprobs ? std::min(p.logprobs, k::kMaxTopLogprobs) : -1;

    const bool rep = p.repetition_penalty != 1.0;
    const bool pen = p.presence_penalty != 0.0 || p.frequency_penalty != 0.0;
    q.history_begin = static_cast<int32_t>(hist_tok.size());
    if (rep || pen) {
      const size_t first = hist_tok.size();
      auto touch = [&](int32_t t) {
        if (t < 0 || t >= V) return false;
        if (!seen[t]) {
          seen[t] = 1;
          hist_tok.push_back(t);
        }
        return true;
      };
      // Prompt-only tokens change nothing without a repetition penalty.
      if (rep)
        for (int32_t t : rows[r].prompt) touch(t);
      for (int32_t t : rows[r].output)
        if (touch(t)) ++counts[t];
      for (size_t j = first; j < hist_tok.size(); ++j) {
        hist_cnt.push_back(counts[hist_tok[j]]);
        seen[hist_tok[j]] = 0;
        counts[hist_tok[j]] = 0;
      }
    }
    q.history_count = static_cast<int32_t>(hist_tok.size()) - q.history_begin;
    q.mask_begin = static_cast<int32_t>(mask.size());
    if (static_cast<int64_t>(rows[r].output.size()) < p.min_tokens) {
      for (int32_t t : p.stop_token_ids)
        if (t >= 0 && t < V) mask.push_back(t);
      if (!p.ignore_eos)
        for (int32_t t : p.eos_token_ids)
          if (t >= 0 && t < V) mask.push_back(t);
    }
    q.mask_count = static_cast<int32_t>(mask.size()) - q.mask_begin;
    q.bias_begin = static_cast<int32_t>(bias_tok.size());
    for (const auto& [t, b] : p.logit_bias)
      if (t >= 0 && t < V) bias_tok.push_back(t), bias_val.push_back(b);
    q.bias_count = static_cast<int32_t>(bias_tok.size()) - q.bias_begin;
    if (!rows[r].allowed.empty()) {
      Require(static_cast<int64_t>(rows[r].allowed.size()) >= words, ErrorCode::kInternal,
              "cuda backend: SampleRows: an allowed-token mask is short of the vocabulary");
      q.allowed_row = allowed_rows++;
      allowed.insert(allowed.end(), rows[r].allowed.begin(), rows[r].allowed.begin() + words);
    }
  }

  DeviceTensor d_params = UploadWords(be, params.data(), params.size() * sizeof(params[0]));
  DeviceTensor d_tok = UploadWords(be, hist_tok.data(), hist_tok.size() * sizeof(int32_t));
  DeviceTensor d_cnt = UploadWords(be, hist_cnt.data(), hist_cnt.size() * sizeof(int32_t));
  DeviceTensor d_mask = UploadWords(be, mask.data(), mask.size() * sizeof(int32_t));
  DeviceTensor d_bias_tok = UploadWords(be, bias_tok.data(), bias_tok.size() * sizeof(int32_t));
  DeviceTensor d_bias_val = UploadWords(be, bias_val.data(), bias_val.size() * sizeof(float));
  DeviceTensor d_allowed = UploadWords(be, allowed.data(), allowed.size() * sizeof(uint32_t));
  DeviceTensor work = be.Alloc(DType::kF32, {n, V});
  static_assert(sizeof(k::SampleRowResult) % 4 == 0);
  DeviceTensor d_out =
      be.Alloc(DType::kI32, {n * static_cast<int64_t>(sizeof(k::SampleRowResult) / 4)});
  try {
    k::SampleRows(logits.data<float>(), n, V, d_params.data<k::SampleRowParams>(),
                  d_tok.data<int32_t>(), d_cnt.data<int32_t>(), d_mask.data<int32_t>(),
                  d_bias_tok.data<int32_t>(),
                  reinterpret_cast<const float*>(d_bias_val.data<int32_t>()),
                  reinterpret_cast<const uint32_t*>(d_allowed.data<int32_t>()), work.data<float>(),
                  d_out.data<k::SampleRowResult>(), stream);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, std::string("cuda backend SampleRows: ") + e.what());
  }
  std::vector<k::SampleRowResult> res(static_cast<size_t>(n));
  be.Download(d_out, res.data());
  for (int64_t r = 0; r < n; ++r) {
    const SamplingParams& p = *rows[r].params;
    const k::SampleRowResult& s = res[static_cast<size_t>(r)];
    SampledToken& t = out[static_cast<size_t>(r)];
    t.token = s.token;
    if (!p.return_logprobs) continue;
    t.logprob = s.logprob;
    const int m = std::min(p.logprobs, k::kMaxTopLogprobs);
    for (int j = 0; j < m && s.top_ids[j] >= 0; ++j)
      t.top.emplace_back(s.top_ids[j], s.top_logprobs[j]);
  }
}

}  // namespace m3::engine::backend
