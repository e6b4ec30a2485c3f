// The x86 vector extensions the CPU kernels pick from at run time. The library is built for
// baseline x86-64, so each wider kernel is compiled with a target attribute and chosen per
// machine; each query is answered once. Other architectures report none and take the portable
// loops.
#pragma once

namespace m3::kernels::cpu {

inline bool CpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

inline bool CpuHasAvx512f() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

}  // namespace m3::kernels::cpu
