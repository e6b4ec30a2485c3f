// RunVerify: hand-laid ForwardBatches over hand-assigned pages (tests/cuda/paged_sequences.h).
#include "tests/runtime/verify_forward.h"

#include <algorithm>

#include "engine/backend/make_device.h"
#include "engine/backend/make_m3_ops.h"
#include "engine/minimax_m3/m3_config.h"
#include "engine/minimax_m3/m3_decoder_graph.h"
#include "engine/minimax_m3/m3_model_weights.h"
#include "engine/model_registry.h"
#include "shared/safetensors.h"
#include "tests/cuda/paged_sequences.h"
#include "tests/test_util.h"

#include <doctest/doctest.h>

namespace m3::test {
namespace {

constexpr int64_t kPage = 16;
constexpr int32_t kDrafts = kVerifyDrafts;

// Logits rows of `batch` as vectors.
std::vector<std::vector<float>> Rows(const std::vector<float>& logits, int64_t vocab) {
  std::vector<std::vector<float>> out;
  for (size_t r = 0; r * static_cast<size_t>(vocab) < logits.size(); ++r)
    out.emplace_back(logits.begin() + static_cast<long>(r * vocab),
                     logits.begin() + static_cast<long>((r + 1) * vocab));
  return out;
}

}  // namespace

const std::vector<int32_t> kVerifyContext = {
    3,   1,   94,  100, 94,  324, 88,  210, 399, 382, 268, 431, 438, 25,  2,   210, 1,   96,  411,
    210, 343, 285, 270, 268, 271, 76,  312, 42,  2,   210, 1,   76,  84,  210, 4,   210, 5,   414,
    52,  387, 268, 285, 270, 330, 25,  2,   356, 268, 339, 25,  2,   356, 268, 337, 25,  2,   285,
    356, 268, 330, 25,  2,   356, 268, 339, 309, 25,  2,   356, 268, 336, 309, 25,  2,   356, 268};

VerifyRun RunVerify(const std::string& device) {
  engine::RunnerOptions ro;
  ro.device = device;
  auto runner = engine::LoadModelRunner(DataPath("demo-model/model"), ro);
  const int64_t V = runner->info().vocab_size;
  const int32_t width = static_cast<int32_t>((kVerifyContext.size() + kPage - 1) / kPage);
  runner->AllocateKvCache(3 * width, kPage);
  PagedSeq a, b, c;
  for (int32_t j = 0; j < width; ++j) {
    a.pages.push_back(j);
    b.pages.push_back(width + j);
    c.pages.push_back(2 * width + j);
  }
  const int32_t n = static_cast<int32_t>(kVerifyContext.size());
  std::vector<float> logits;
  // Prefill: A to n - 1, B and C to n - 1 - k.
  a.tokens.assign(kVerifyContext.begin(), kVerifyContext.end() - 1);
  b.tokens.assign(kVerifyContext.begin(), kVerifyContext.end() - 1 - kDrafts);
  c.tokens = b.tokens;
  runner->Execute(StepBatch({&a, &b, &c}, kPage, width), logits);
  a.cached = static_cast<int32_t>(a.tokens.size());
  b.cached = c.cached = static_cast<int32_t>(b.tokens.size());
  // Verify step: A decodes its last token, B runs 1 + k rows with logits at each.
  a.tokens = kVerifyContext;
  b.tokens = kVerifyContext;
  // B's rows: the last known token then the k drafts; its cached count stays n - 1 - k.
  b.cached = n - 1 - kDrafts;
  b.tokens.resize(static_cast<size_t>(n));
  engine::ForwardBatch step = StepBatch({&a, &b}, kPage, width);
  // A's cached is n - 1 and B's n - 1 - k: StepBatch gave A one row (a decode) and B 1 + k.
  step.logits_rows.clear();
  for (int32_t r = 0; r < step.num_rows(); ++r) step.logits_rows.push_back(r);
  REQUIRE(step.num_decodes == 1);
  REQUIRE(step.num_rows() == 2 + kDrafts);
  VerifyRun out;
  engine::CaptureRequest capture;
  capture.block_indices = true;
  capture.out = &out.selections.selections;
  runner->SetCapture(capture);
  runner->Execute(step, logits);
  runner->SetCapture({});
  std::vector<std::vector<float>> rows = Rows(logits, V);
  out.decode = rows[0];
  out.verify.assign(rows.begin() + 1, rows.end());
  // C: the same positions as B's rows, one decode step each.
  for (int32_t pos = n - 1 - kDrafts; pos < n; ++pos) {
    c.tokens.push_back(kVerifyContext[static_cast<size_t>(pos)]);
    runner->Execute(StepBatch({&c}, kPage, width), logits);
    c.cached = static_cast<int32_t>(c.tokens.size());
    out.sequential.push_back(logits);
  }
  return out;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

BucketRun RunUniformVerify(const std::string& device, bool buckets, bool graphs,
                           bool capture_hidden) {
  namespace mm = engine::minimax_m3;
  const std::string dir = DataPath("demo-model/model");
  const mm::ModelConfig config = mm::LoadModelConfig(dir);
  auto be = engine::backend::MakeDevice(device);
  auto ops = engine::backend::MakeM3Ops(*be);
  engine::backend::LoadReport report;
  const mm::M3ModelWeights weights =
      mm::LoadM3ModelWeights(WeightStore::OpenDirectory(dir), config, *be, report);
  mm::DecoderStepLimits limits;
  limits.max_num_seqs = 4;
  limits.max_batched_tokens = 256;
  limits.max_logits_per_seq = 1 + kVerifyDrafts;
  limits.decode_buckets = buckets;
  limits.graphs = graphs;
  limits.graph_hidden_layers = 3;
  mm::M3DecoderGraph graph(config, weights, *be, *ops, limits);
  const int32_t width = 8;
  graph.AllocateKvCache(3 * width, kPage);
  // Three sequences of different lengths from the demo context, each on its own pages.
  std::vector<PagedSeq> seqs(3);
  const int32_t lengths[] = {76, 41, 60};
  for (int32_t i = 0; i < 3; ++i) {
    for (int32_t j = 0; j < width; ++j) seqs[i].pages.push_back(i * width + j);
    seqs[i].tokens.assign(kVerifyContext.begin(),
                          kVerifyContext.begin() + lengths[i] - 1 - kDrafts);
  }
  std::vector<float> logits;
  graph.Execute(StepBatch({&seqs[0], &seqs[1], &seqs[2]}, kPage, width), logits, {});
  for (int32_t i = 0; i < 3; ++i) {
    seqs[i].cached = static_cast<int32_t>(seqs[i].tokens.size());
    seqs[i].tokens.assign(kVerifyContext.begin(), kVerifyContext.begin() + lengths[i]);
  }
  engine::ForwardBatch step = StepBatch({&seqs[0], &seqs[1], &seqs[2]}, kPage, width);
  step.logits_rows.clear();
  for (int32_t r = 0; r < step.num_rows(); ++r) step.logits_rows.push_back(r);
  REQUIRE(step.num_rows() == 3 * (1 + kDrafts));
  REQUIRE(step.num_decodes == 0);
  BucketRun out;
  engine::CaptureRequest capture;
  if (capture_hidden) {
    capture.hidden_states = true;
    capture.hidden_state_layers = {1, 2, 3};
    capture.out = &out.hidden;
  }
  graph.Execute(step, out.logits, capture);
  if (graph.decode_graphs()) {
    out.bucket_steps = graph.decode_graphs()->replays();
    out.recorded = graph.decode_graphs()->recorded();
  }
  return out;
}

}  // namespace m3::test
