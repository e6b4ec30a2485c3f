// ParallelRunner: the lock-step dispatch, per-rank media features, rank 0's results.
#include "engine/parallel/parallel_runner.h"

#include <string>
#include <vector>

#include "shared/error.h"

namespace m3::engine::parallel {
namespace {

// One media segment encoded on every rank; each rank's step takes its own rank's features.
class RankedEncoderOutput : public EncoderOutput {
 public:
  explicit RankedEncoderOutput(std::vector<std::shared_ptr<const EncoderOutput>> parts)
      : parts_(std::move(parts)) {}
  int64_t tokens() const override { return parts_.front()->tokens(); }
  // What one device holds (the encoder cache budgets per device, like the KV cache).
  int64_t bytes() const override { return parts_.front()->bytes(); }
  const std::shared_ptr<const EncoderOutput>& part(int rank) const {
    return parts_.at(static_cast<size_t>(rank));
  }

 private:
  std::vector<std::shared_ptr<const EncoderOutput>> parts_;
};

class ParallelRunner : public ModelRunner {
 public:
  ParallelRunner(int ranks, const RankRunnerFactory& make, const GroupFailureHooks& hooks)
      : threads_(ranks), ranks_(static_cast<size_t>(ranks)) {
    threads_.SetOnError(hooks.abort, hooks.reset);
    threads_.Run([&](int r) { ranks_[static_cast<size_t>(r)] = make(r); });
    // After loading: a rank that fails to load leaves the others loading (no collective waits
    // yet), and the failure is reported when they are done.
    if (hooks.stuck) threads_.SetOnStuck(hooks.stuck, hooks.stuck_grace);
    info_ = ranks_.front()->info();
    info_.ranks.clear();
    for (const auto& r : ranks_)
      for (const RunnerInfo::DeviceWeights& d : r->info().ranks) info_.ranks.push_back(d);
  }
  ~ParallelRunner() override {
    // Each rank's runner is destroyed on its own thread (its backend's resources with it).
    try {
      threads_.Run([&](int r) { ranks_[static_cast<size_t>(r)].reset(); });
    } catch (...) {
    }
  }

  const RunnerInfo& info() const override { return info_; }
  std::vector<MediaSegment> SplitMedia(bool video, std::array<int64_t, 3> grid) const override {
    return ranks_.front()->SplitMedia(video, grid);
  }

  std::shared_ptr<const EncoderOutput> Encode(const float* patches,
                                              const MediaSegment& segment) override {
    std::vector<std::shared_ptr<const EncoderOutput>> parts(ranks_.size());
    threads_.Run([&](int r) { parts[static_cast<size_t>(r)] = rank(r).Encode(patches, segment); });
    return std::make_shared<RankedEncoderOutput>(std::move(parts));
  }

  int64_t KvBytesPerPage(int64_t page_size) const override {
    return ranks_.front()->KvBytesPerPage(page_size);
  }
  void AllocateKvCache(int64_t num_pages, int64_t page_size) override {
    threads_.Run([&](int r) { rank(r).AllocateKvCache(num_pages, page_size); });
  }
  int64_t num_pages() const override { return ranks_.front()->num_pages(); }
  int64_t page_size() const override { return ranks_.front()->page_size(); }

  void Execute(const ForwardBatch& batch, std::vector<float>& logits) override {
    const std::vector<ForwardBatch> local = RankBatches(batch);
    threads_.Run([&](int r) {
      if (r == 0) {
        rank(0).Execute(Local(batch, local, 0), logits);
      } else {
        std::vector<float> none;
        rank(r).Execute(Local(batch, local, r), none);
      }
    });
  }

  void ExecuteAndSample(const ForwardBatch& batch, std::span<const SampleRow> rows,
                        std::vector<SampledToken>& out) override {
    const std::vector<ForwardBatch> local = RankBatches(batch);
    threads_.Run([&](int r) {
      if (r == 0) {
        rank(0).ExecuteAndSample(Local(batch, local, 0), rows, out);
      } else {
        // The other ranks compute no logits (rank 0 alone runs the LM head): nothing to sample.
        std::vector<SampledToken> none;
        rank(r).ExecuteAndSample(Local(batch, local, r), {}, none);
      }
    });
  }

  // Intermediates are those of rank 0 (the residual stream is whole on every rank).
  void SetCapture(const CaptureRequest& capture) override { ranks_.front()->SetCapture(capture); }

 private:
  ModelRunner& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

  // Without media every rank runs the caller's batch; with media, each rank gets a copy whose
  // spans point at its own features. Throws kInvalidArgument on features this runner did not
  // encode.
  std::vector<ForwardBatch> RankBatches(const ForwardBatch& batch) const {
    std::vector<ForwardBatch> out;
    if (batch.media.empty()) return out;
    for (const MediaSpan& m : batch.media)
      Require(dynamic_cast<const RankedEncoderOutput*>(m.features.get()) != nullptr,
              ErrorCode::kInvalidArgument,
              "forward batch: media features were not encoded by this runner");
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ForwardBatch b = batch;
      for (MediaSpan& m : b.media)
        m.features = static_cast<const RankedEncoderOutput&>(*m.features).part(static_cast<int>(r));
      out.push_back(std::move(b));
    }
    return out;
  }
  static const ForwardBatch& Local(const ForwardBatch& batch,
                                   const std::vector<ForwardBatch>& local, int r) {
    return local.empty() ? batch : local[static_cast<size_t>(r)];
  }

  RankThreads threads_;
  std::vector<std::unique_ptr<ModelRunner>> ranks_;
  RunnerInfo info_;
};

}  // namespace

std::unique_ptr<ModelRunner> MakeParallelRunner(int ranks, const RankRunnerFactory& make,
                                                const GroupFailureHooks& hooks) {
  Require(ranks >= 1, ErrorCode::kInvalidArgument, "a parallel runner needs at least one rank");
  return std::make_unique<ParallelRunner>(ranks, make, hooks);
}

}  // namespace m3::engine::parallel
