// ParallelRunner: a ModelRunner over the ranks of a tensor- / expert-parallel group, each rank
// a runner of its own (its backend, its weight slices, its KV heads, its communicator) on its
// own thread. Every call runs on all ranks in lock step; the ranks hold the same pages (one
// block table serves all), rank 0's logits / samples are the answer. Threads rather than a
// process per GPU: the scheduler, caches, engine loop and gRPC server stay exactly as for one
// device (one loop hands every rank the same ForwardBatch by reference, no batch IPC), sampled
// tokens need no broadcast, and NCCL runs as well from threads. Media are encoded on every
// rank (the vision tower is replicated): the ranks encode at once on their own devices, so this
// costs no time over rank 0 encoding alone and needs no broadcast of the features.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "engine/parallel/rank_threads.h"
#include "engine/step/model_runner.h"

namespace m3::engine::parallel {

// Builds rank `rank`'s runner; called on that rank's thread.
using RankRunnerFactory = std::function<std::unique_ptr<ModelRunner>(int rank)>;

// How a failed rank releases the others (see RankThreads::SetOnError): abort the group's
// collectives, then reset them once every rank has returned. Groups that cannot be released
// from the failing rank's thread (NCCL) give `stuck` instead (RankThreads::SetOnStuck).
// Empty: no hooks.
struct GroupFailureHooks {
  std::function<void(int)> abort;
  std::function<void()> reset;
  std::function<void()> stuck;
  std::chrono::milliseconds stuck_grace{5000};
};

std::unique_ptr<ModelRunner> MakeParallelRunner(int ranks, const RankRunnerFactory& make,
                                                const GroupFailureHooks& hooks = {});

}  // namespace m3::engine::parallel
