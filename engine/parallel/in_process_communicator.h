// InProcessCommunicator: collectives among ranks that are threads of one process on the CPU
// backend (their tensors are host memory). Ranks meet at a shared rendezvous (a barrier):
// each publishes its tensor's address, every rank then reduces its own slice of the elements
// over all ranks in rank order (so the sum is the same whatever the threads' timing) and writes
// it into every rank's tensor, and a second barrier ends the collective. A rank that fails
// outside a collective aborts the group (Abort), so the others fail too instead of waiting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/parallel/communicator.h"

namespace m3::engine::parallel {

// The rendezvous the ranks of one group share.
class InProcessGroup {
 public:
  explicit InProcessGroup(int size);
  int size() const { return size_; }
  // Wakes every rank waiting in a collective, and every later collective, with kInternal: a
  // rank failed and will not arrive.
  void Abort();
  // Clears an abort; only while no rank is inside a collective (all have left the failed call).
  void Reset();

 private:
  friend class InProcessCommunicator;
  // Waits until all ranks have arrived; throws kInternal once the group is aborted.
  void Wait();

  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<const backend::DeviceTensor*> posted_;  // each rank's tensor during a collective
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank);
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void AllReduceSum(const backend::DeviceTensor& t) override;
  void AllGatherRows(const backend::DeviceTensor& in, const backend::DeviceTensor& out) override;
  void AllGatherColumns(const backend::DeviceTensor& in, const backend::DeviceTensor& out,
                        const backend::DeviceTensor& scratch) override;
  void Barrier() override;

 private:
  // Publishes `t` and waits until every rank has; throws kInternal (on every rank) when the
  // ranks' tensors disagree in dtype or size.
  void Post(const backend::DeviceTensor& t);

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

}  // namespace m3::engine::parallel
