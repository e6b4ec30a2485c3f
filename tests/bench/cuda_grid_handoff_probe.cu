// m3-probe-grid-handoff: a probe of what a grid-wide handoff costs on the GPU, for the batch-1 MSA
// decode chain (index scan, then the selecting attention: docs/perf-log, "The last leads for 128K
// batch 1"), where a kernel boundary under programmatic dependent launch sits between the scan's
// last store and the attention's first read. Each way runs 256 rounds of "every thread block reads
// a word its neighbour wrote last round, then writes its own", one round per handoff:
//   - plain:       one kernel a round, captured in a graph (ordinary stream order);
//   - chained:     the same kernels with programmatic dependent launch (griddepcontrol.wait at the
//                  start, launch_dependents after it), as kernels/cuda/cuda_util.cuh chains them;
//   - grid.sync:   one cooperative kernel looping over the rounds, cooperative_groups' grid
//                  barrier between them;
//   - counter:     the same kernel with a hand-written barrier (one arrival counter, a
//                  generation word) instead;
//   - grid.sync in clusters of 16: the cooperative kernel launched in thread-block clusters too
//                  (whether the launch is accepted at all).
// Prints the median time per round over 9 runs of each, with 132 (or 128) thread blocks of 128
// threads, one per SM.
// m3-probe-grid-handoff (a CMake target of CUDA builds); run it on the GPU machine, no arguments.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace cg = cooperative_groups;

namespace {

constexpr int kRounds = 256, kThreads = 128, kRuns = 9;

// One round of a block: read what the neighbouring block wrote last round (past this SM's cache:
// within one kernel it may have been written just now), write this block's word.
__device__ __forceinline__ void Handoff(uint32_t* words, int round) {
  if (threadIdx.x != 0) return;
  const unsigned n = gridDim.x, b = blockIdx.x;
  const uint32_t v = *reinterpret_cast<volatile uint32_t*>(&words[(round & 1) * n + (b + 1) % n]);
  words[((round + 1) & 1) * n + b] = v + 1;
}

__global__ void Round(uint32_t* words, int round, bool chained) {
  if (chained) asm volatile("griddepcontrol.wait;\ngriddepcontrol.launch_dependents;" ::: "memory");
  Handoff(words, round);
}

// Sense-reversing barrier: the last arrival resets the count and bumps the generation.
__device__ void CounterBarrier(unsigned* count, volatile unsigned* generation) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned gen = *generation;
    __threadfence();
    if (atomicAdd(count, 1u) == gridDim.x - 1) {
      *count = 0;
      __threadfence();
      atomicAdd(const_cast<unsigned*>(generation), 1u);
    } else {
      while (*generation == gen) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

__global__ void Persistent(uint32_t* words, unsigned* barrier, bool grid_sync) {
  for (int round = 0; round < kRounds; ++round) {
    Handoff(words, round);
    if (grid_sync)
      cg::this_grid().sync();
    else
      CounterBarrier(barrier, barrier + 1);
  }
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  cudaGetLastError();
  return false;
}

template <typename F>
double MedianUsPerRound(F&& launch_all, cudaStream_t s) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> us;
  for (int run = 0; run < kRuns + 1; ++run) {
    cudaEventRecord(a, s);
    if (!launch_all()) return -1.0;
    cudaEventRecord(b, s);
    if (!Ok(cudaEventSynchronize(b), "run")) return -1.0;
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, a, b);
    if (run > 0) us.push_back(ms * 1000.0 / kRounds);
  }
  std::sort(us.begin(), us.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return us[us.size() / 2];
}

}  // namespace

int main() {
  int sms = 0, coop = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0);
  uint32_t* words = nullptr;
  unsigned* barrier = nullptr;
  if (!Ok(cudaMalloc(&words, 2 * 1024 * 4), "words") || !Ok(cudaMalloc(&barrier, 8), "barrier"))
    return 1;
  cudaMemset(words, 0, 2 * 1024 * 4);
  cudaMemset(barrier, 0, 8);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::printf("%d SMs, cooperative launch %d, %d rounds a run, median of %d runs\n", sms, coop,
              kRounds, kRuns);

  for (int chained = 0; chained < 2; ++chained) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int round = 0; round < kRounds; ++round) {
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(sms);
      config.blockDim = dim3(kThreads);
      config.stream = s;
      config.attrs = &attr;
      config.numAttrs = chained ? 1 : 0;
      cudaLaunchKernelEx(&config, Round, words, round, chained != 0);
    }
    if (!Ok(cudaStreamEndCapture(s, &graph), "capture") ||
        !Ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate"))
      return 1;
    const double us =
        MedianUsPerRound([&] { return Ok(cudaGraphLaunch(exec, s), "graph launch"); }, s);
    std::printf("%-34s %6.3f us a round\n",
                chained ? "chained kernels (PDL), graph" : "plain kernels, graph", us);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }

  for (int way = 0; way < 3; ++way) {
    const bool grid_sync = way != 1;
    const int cluster = way == 2 ? 16 : 1;
    const int blocks = cluster > 1 ? sms / cluster * cluster : sms;
    if (cluster > 1 &&
        !Ok(cudaFuncSetAttribute(Persistent, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
            "non-portable clusters"))
      continue;
    const double us = MedianUsPerRound(
        [&] {
          cudaLaunchAttribute attr[2] = {};
          attr[0].id = cudaLaunchAttributeCooperative;
          attr[0].val.cooperative = 1;
          attr[1].id = cudaLaunchAttributeClusterDimension;
          attr[1].val.clusterDim.x = cluster;
          attr[1].val.clusterDim.y = 1;
          attr[1].val.clusterDim.z = 1;
          cudaLaunchConfig_t config{};
          config.gridDim = dim3(blocks);
          config.blockDim = dim3(kThreads);
          config.stream = s;
          config.attrs = attr;
          config.numAttrs = cluster > 1 ? 2 : 1;
          return Ok(cudaLaunchKernelEx(&config, Persistent, words, barrier, grid_sync),
                    "cooperative launch");
        },
        s);
    const char* name = way == 0   ? "grid.sync, one kernel"
                       : way == 1 ? "counter barrier, one kernel"
                                  : "grid.sync, clusters of 16";
    if (us < 0)
      std::printf("%-34s not launched\n", name);
    else
      std::printf("%-34s %6.3f us a round (%d blocks)\n", name, us, blocks);
  }
  return Ok(cudaDeviceSynchronize(), "probe") ? 0 : 1;
}
