// The x86 vector extensions the media kernels pick from at run time (the binaries are built for
// baseline x86-64, so every wider kernel is chosen per machine). Each query is answered once.
#pragma once

namespace m3::media {

inline bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// AVX-512 F + BW: 512-bit byte and word arithmetic.
inline bool CpuHasAvx512bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has;
}

// AVX-512 F + BW + VL + VBMI: byte permutes across a whole register, and masked narrow stores.
inline bool CpuHasVbmi() {
  static const bool has = CpuHasAvx512bw() && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vbmi");
  return has;
}

}  // namespace m3::media
