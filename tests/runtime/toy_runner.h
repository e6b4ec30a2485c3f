// ToyRunner: a test-only ModelRunner for the scheduler / engine-core unit tests, small enough
// to check every ForwardBatch invariant the contract states, yet sensitive to every mistake
// the runtime could make: each position's cached value depends on its token (or media feature)
// and on everything before it, read back through the block table, so a wrong page, slot,
// prefix-cache hit or media span changes the tokens that follow. The end-to-end tests use the
// real runner (LoadModelRunner); this one only isolates the runtime's own logic.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/step/model_runner.h"

namespace m3::test {

class ToyRunner : public engine::ModelRunner {
 public:
  static constexpr int32_t kVocab = 64;
  static constexpr int32_t kImageToken = 60, kVideoToken = 61, kEos = 63;
  static constexpr int64_t kPatchDim = 4;

  explicit ToyRunner(int64_t max_model_len = 512, int64_t msa_block = 8);

  const engine::RunnerInfo& info() const override { return info_; }
  std::vector<engine::MediaSegment> SplitMedia(bool video,
                                               std::array<int64_t, 3> grid) const override;
  std::shared_ptr<const engine::EncoderOutput> Encode(const float* patches,
                                                      const engine::MediaSegment& seg) override;
  int64_t KvBytesPerPage(int64_t page_size) const override { return page_size * 4; }
  void AllocateKvCache(int64_t num_pages, int64_t page_size) override;
  int64_t num_pages() const override { return num_pages_; }
  int64_t page_size() const override { return page_size_; }
  void Execute(const engine::ForwardBatch& batch, std::vector<float>& logits) override;
  void SetCapture(const engine::CaptureRequest&) override {}

  std::atomic<int64_t> encodes{0};  // successful Encode calls
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> max_rows_seen{0};
  std::atomic<int64_t> execute_delay_us{0};  // slows steps so tests can act mid-stream

 private:
  engine::RunnerInfo info_;
  int64_t num_pages_ = 0, page_size_ = 0;
  std::vector<double> kv_;
};

}  // namespace m3::test
