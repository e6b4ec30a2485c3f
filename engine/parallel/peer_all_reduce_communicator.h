// PeerAllReduceGroup / its communicators: the custom all-reduce of GPU ranks that are threads
// of one process (kernels/cuda/peer_all_reduce.cuh). At creation every pair of the ranks' GPUs
// gets CUDA peer access (cudaDeviceEnablePeerAccess: the buffers are in this process, so no IPC
// handles) and each rank's GPU a staging buffer, arrival flags and an epoch word that the peers
// can read or write over NVLink. A rank's communicator wraps its NCCL communicator: all-reduces
// of at most max_bytes() (decode steps) run the one-shot peer kernel, larger ones (prefill) and
// every other collective stay on NCCL; AllReduceAddRmsNorm fuses the sum with the decoder's
// residual add and RMSNorm in one kernel. The choice depends on the message's shape and dtype
// alone, so every rank takes the same path for the same call (the kernels synchronize the ranks
// among themselves; a rank taking NCCL where its peer took the kernel would hang both).
// Everything is queued on the rank's device stream and is graph-capturable.
//
// What else would cut the per-layer latency of a TP decode step (issue 41), by expected payoff:
// - the shared expert on a second stream inside the recorded graph, beside the router, routing
//   and routed experts (they only meet at the MoE output's sum), and the MSA index scan beside
//   the dense attention work: both hide whole kernel chains rather than shave launches;
// - fewer, larger kernels around the collectives: o_proj's GEMV writing straight into the
//   staging buffer (the one-shot kernel's copy-in then disappears), the MoE combine likewise,
//   and the next layer's QKV GEMV consuming the fused kernel's normalized rows without a round
//   trip (a persistent "layer tail" kernel);
// - a push variant of the one-shot kernel (each rank writes its slice into every peer's buffer
//   with the flag after it, then reads only local memory): one NVLink traversal instead of a
//   flag store plus a remote read round trip, a few microseconds per collective;
// - two-shot (reduce-scatter + all-gather in one kernel) between this path's limit and NCCL's
//   bandwidth regime, for mid-sized prefill chunks;
// - prefetching the next layer's weights into L2 during the collectives' waits.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/device.h"
#include "engine/parallel/communicator.h"

namespace m3::engine::parallel {

// All-reduces up to this many bytes take the one-shot peer kernel, larger ones NCCL. 1 MiB keeps
// every decode step of the real widths (hidden 6144 in bf16: 12 KiB a row, 768 KiB at 64 rows)
// on the peer kernel and prefill chunks on NCCL. Provisional, not yet measured on the H200s:
// one-shot reads (ranks - 1) x the message over NVLink per GPU, so past some size NCCL's ring
// (2 (ranks - 1) / ranks x the message) wins; `m3-bench-tp-step --sweep` measures both per size
// and prints the crossover, which is what this constant should be set to.
// M3_PEER_ALL_REDUCE_MAX_BYTES overrides it (benchmarks; 0 turns the peer path off).
inline constexpr int64_t kPeerAllReduceMaxBytes = int64_t{1} << 20;
// The staging buffer per rank and half: the largest message the override may ask for.
inline constexpr int64_t kPeerStagingBytes = int64_t{8} << 20;

class PeerAllReduceGroup {
 public:
  // Peer access among `devices` (rank i on devices[i]) and the ranks' buffers. Null when some
  // pair of GPUs cannot reach each other, or there are more than 8 ranks (logged once per
  // process); with `required` that throws kUnavailable instead, naming the pair.
  static std::shared_ptr<PeerAllReduceGroup> Make(const std::vector<int>& devices, bool required);
  ~PeerAllReduceGroup();
  PeerAllReduceGroup(const PeerAllReduceGroup&) = delete;
  PeerAllReduceGroup& operator=(const PeerAllReduceGroup&) = delete;

  // Rank `rank`'s communicator on `device`'s stream, with `nccl` (the rank's NCCL communicator)
  // for everything the peer kernels do not take.
  std::unique_ptr<Communicator> Wrap(int rank, backend::Device& device,
                                     std::unique_ptr<Communicator> nccl);
  // Releases kernels waiting for a peer that failed and makes every later collective throw
  // kUnavailable. Safe from any thread.
  void Abort();
  int64_t max_bytes() const { return max_bytes_; }

  struct State;

 private:
  PeerAllReduceGroup() = default;
  std::shared_ptr<State> state_;
  int64_t max_bytes_ = 0;
};

}  // namespace m3::engine::parallel
