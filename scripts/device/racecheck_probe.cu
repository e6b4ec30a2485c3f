// racecheck_probe: tells a compute-sanitizer failure of this machine from one of the project's
// kernels. `clean` runs a race-free kernel with the shared-memory pattern of QkNormRopeToPages
// (per-warp rows of a static shared array, __syncwarp, lanes reading partner channels); `race`
// runs a kernel with a planted shared-memory race that racecheck must report. Built on the dev
// machine with the project's flags and on the GPU machine, by scripts/device/bf16_goldens.sh.
// Usage: racecheck_probe clean|race
#include <cstdio>
#include <cstring>

namespace {

constexpr int kWarps = 4;
constexpr int kDim = 128;

__global__ void Clean(const float* in, float* out) {
  __shared__ float buf[kWarps][kDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* src = in + (blockIdx.x * kWarps + warp) * kDim;
  float* b = buf[warp];
  for (int i = lane; i < kDim; i += 32) b[i] = src[i] * 2.0f;
  __syncwarp();
  for (int i = lane; i < kDim; i += 32)
    out[(blockIdx.x * kWarps + warp) * kDim + i] = b[i] + b[(i + kDim / 2) % kDim];
}

__global__ void Race(float* out) {
  __shared__ float s[256];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 64) % 256];  // no barrier
}

int Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("%s: %s\n", what, cudaGetErrorString(e));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  const int blocks = 8, n = blocks * kWarps * kDim;
  float *in = nullptr, *out = nullptr;
  if (Check(cudaMalloc(&in, n * sizeof(float)), "cudaMalloc") ||
      Check(cudaMalloc(&out, n * sizeof(float)), "cudaMalloc") ||
      Check(cudaMemset(in, 0, n * sizeof(float)), "cudaMemset"))
    return 1;
  if (race)
    Race<<<blocks, 256>>>(out);
  else
    Clean<<<blocks, kWarps * 32>>>(in, out);
  if (Check(cudaGetLastError(), "launch") || Check(cudaDeviceSynchronize(), "sync")) return 1;
  std::printf("racecheck_probe %s: ran\n", race ? "race" : "clean");
  cudaFree(in);
  cudaFree(out);
  return 0;
}
