// m3-probe-cluster-mailbox: a probe for compute-sanitizer synccheck and thread-block clusters
// (docs/perf-log, "synccheck and clusters above 8"): the decode attention's cluster mailbox
// protocol alone (kernels/cuda/cluster_mailbox.cuh: barrier init and fence, relaxed cluster arrive,
// cluster wait, st.async with complete_tx to every rank, the owner's wait for its bytes, a check of
// every value, the barrier invalidated), in clusters of C CTAs, N clusters, optionally chained
// launches (programmatic dependent launch) and two control modes without the mailbox.
// Run on the GPU machine (a CMake target of CUDA builds), plain and under
// `compute-sanitizer --tool synccheck`:
//   m3-probe-cluster-mailbox C N [runs] [chained 0|1] [mode 0|1|2]
//   mode 0: the mailbox; 1: two full cluster barriers and a shared store; 2: an empty kernel.
// Exit 0 when every run completed and every mailbox held what was sent.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cluster_mailbox.cuh"

namespace {

using namespace m3::kernels::cuda;

constexpr int kThreads = 128;
constexpr size_t kTiles = 48 * 1024;  // as the decode attention's tiles, before the mailbox

__global__ void Probe(int cluster, int* wrong, int mode) {
  extern __shared__ __align__(128) unsigned char smem[];
  if (mode == 2) {
    __syncthreads();
    return;
  }
  if (mode == 1) {
    asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;\n" ::: "memory");
    reinterpret_cast<float*>(smem)[threadIdx.x] = static_cast<float>(threadIdx.x);
    asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;\n" ::: "memory");
    return;
  }
  float* box = reinterpret_cast<float*>(smem + kTiles + 16);
  if (threadIdx.x == 0) MailboxInit(box, blockDim.x);
  ClusterArriveRelaxed();
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  unsigned rank = 0;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  for (int i = threadIdx.x; i < static_cast<int>(kTiles / 4); i += blockDim.x)
    reinterpret_cast<float*>(smem)[i] = static_cast<float>(i);
  ClusterWait();
  // Thread t sends one float4 to rank t % C, at slot rank * (128 / C) + t / C of its mailbox.
  const int t = threadIdx.x, per = kThreads / cluster;
  const float v = static_cast<float>(rank) * 1000.0f + static_cast<float>(t);
  MailboxPush(box, box + (rank * per + t / cluster) * 4,
              make_float4(v, v + 0.25f, v + 0.5f, v + 0.75f), t % cluster);
  MailboxWait(box, kThreads * 16);
  const int s = threadIdx.x, sender = s / per, from = (s % per) * cluster + static_cast<int>(rank);
  const float want = static_cast<float>(sender) * 1000.0f + static_cast<float>(from);
  if (box[s * 4] != want || box[s * 4 + 3] != want + 0.75f) atomicAdd(wrong, 1);
  MailboxRetire(box);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: probe CLUSTER CLUSTERS [runs] [chained 0|1] [mode 0|1|2]\n");
    return 2;
  }
  const int cluster = std::atoi(argv[1]), clusters = std::atoi(argv[2]);
  const int runs = argc > 3 ? std::atoi(argv[3]) : 3, chained = argc > 4 ? std::atoi(argv[4]) : 0;
  const int mode = argc > 5 ? std::atoi(argv[5]) : 0;
  if (cluster < 1 || cluster > 16 || kThreads % cluster != 0 || clusters < 1 || runs < 1) {
    std::fprintf(stderr, "probe: CLUSTER must divide 128 and be at most 16; CLUSTERS, runs >= 1\n");
    return 2;
  }
  const size_t smem = kTiles + 16 + kThreads * 16;
  cudaFuncSetAttribute(Probe, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cudaFuncSetAttribute(Probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  int* wrong = nullptr;
  cudaMalloc(&wrong, sizeof(int));
  cudaMemset(wrong, 0, sizeof(int));
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(cluster * clusters);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = chained ? 2 : 1;
  int active = 0;
  cudaOccupancyMaxActiveClusters(&active, Probe, &cfg);
  for (int r = 0; r < runs; ++r)
    if (cudaLaunchKernelEx(&cfg, Probe, cluster, wrong, mode) != cudaSuccess) break;
  const cudaError_t e = cudaStreamSynchronize(stream);
  int h = -1;
  cudaMemcpy(&h, wrong, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf(
      "clusters of %d x %d (at most %d at once), %d runs, chained %d, mode %d: %s, %d wrong\n",
      cluster, clusters, active, runs, chained, mode, cudaGetErrorString(e), h);
  return e == cudaSuccess && h == 0 ? 0 : 1;
}
