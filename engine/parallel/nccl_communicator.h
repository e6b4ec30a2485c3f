// NcclGroup / NcclCommunicator: collectives among ranks that are threads of one process, one
// GPU each, over NCCL (NVLink / PCIe; decode-sized all-reduces on the peer kernels in front of
// it, peer_all_reduce_communicator.h, as AllReduceMode says), queued on each rank's CUDA device
// stream so they order with its kernels and can be captured into its decode graphs. libnccl.so.2
// (from the CUDA toolkit) is loaded when a group is made, so binaries that never run parallel on
// GPUs do not need it. Built where nvcc and nccl.h were found (M3_HAVE_NCCL).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/device.h"
#include "engine/parallel/communicator.h"
#include "shared/error.h"

namespace m3::engine::parallel {

// True when this build has the NCCL communicator.
bool BuiltWithNccl();

class PeerAllReduceGroup;

// Which all-reduce a group's communicators run (--all-reduce): kAuto the peer kernels
// (peer_all_reduce_communicator.h) for the messages they take where every pair of the GPUs has
// peer access, else NCCL (logged once); kCustom the same, failing to set up without peer
// access; kNccl NCCL only (the comparison baseline).
enum class AllReduceMode { kAuto, kNccl, kCustom };

// "auto", "nccl" or "custom"; kInvalidArgument otherwise.
inline AllReduceMode ParseAllReduceMode(const std::string& name) {
  if (name == "auto") return AllReduceMode::kAuto;
  if (name == "nccl") return AllReduceMode::kNccl;
  if (name == "custom") return AllReduceMode::kCustom;
  throw Error(ErrorCode::kInvalidArgument,
              "all-reduce must be 'auto', 'nccl' or 'custom', not '" + name + "'");
}

class NcclGroup {
 public:
  // One communicator per GPU of `devices` (ncclCommInitAll), rank i on devices[i], with the
  // peer all-reduce in front of it as `mode` says. Throws kInvalidArgument when the machine has
  // fewer GPUs, kUnavailable when libnccl.so.2 cannot be loaded or NCCL cannot set up the group
  // (or, with kCustom, the GPUs lack peer access), and kUnsupported in builds without NCCL.
  explicit NcclGroup(const std::vector<int>& devices, AllReduceMode mode = AllReduceMode::kNccl);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // Rank `rank`'s communicator, on `device`'s stream (a CUDA device on devices[rank]); the
  // communicator then owns its NCCL handle. Call once per rank, on the rank's thread.
  std::unique_ptr<Communicator> Bind(int rank, backend::Device& device);

  // Whether the communicators run the peer all-reduce (else NCCL only).
  bool peer_all_reduce() const { return peer_ != nullptr; }
  // The largest all-reduce the peer kernels take (0 without them).
  int64_t peer_max_bytes() const;

  // Aborts every rank's NCCL communicator (ncclCommAbort) and the peer all-reduce, which
  // releases ranks whose kernels wait for a peer that failed; later collectives throw
  // kUnavailable. For good: an aborted NCCL communicator cannot be reused. Safe from any thread,
  // while collectives run.
  void Abort();

  struct State;  // the ranks' handles, shared with their communicators

 private:
  std::vector<int> devices_;
  std::shared_ptr<State> state_;
  std::shared_ptr<PeerAllReduceGroup> peer_;  // null: NCCL only
};

}  // namespace m3::engine::parallel
