// Device helpers of the GPU benchmarks (not engine kernels): deterministic random fills of
// bf16 / f32 buffers made on the device (weights and KV pages at real sizes never pass through
// the host), and a streaming read of a large buffer for the HBM bandwidth figure.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace m3::bench {

// p[i] = offset + scale * u_i, u_i uniform in [-1, 1) from a counter hash of (seed, i).
void FillUniformBf16(void* p, size_t n, uint64_t seed, float scale, float offset,
                     cudaStream_t stream);
void FillUniformF32(float* p, size_t n, uint64_t seed, float scale, float offset,
                    cudaStream_t stream);

// Reads all `bytes` (a multiple of 16) of p with 16-byte loads over every SM and writes one
// word per block into sink (at least ReadSinkWords() words), so the reads cannot be dropped.
void StreamRead(const void* p, size_t bytes, uint32_t* sink, cudaStream_t stream);
size_t ReadSinkWords();

}  // namespace m3::bench
