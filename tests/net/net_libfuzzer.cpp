// libFuzzer entry point for the network fuzz properties (net_fuzz_targets.h). The first byte
// seeds the byte splits and, unless M3_NET_FUZZ_TARGET is "http" or "json", also picks the
// target (even: the HTTP request parser, odd: the JSON request parsers: the preprocessing
// request and the OpenAI / Anthropic request readers). A property violation aborts with the
// reason, so libFuzzer saves the input.
//
// Time is a property too (issue 39: bodies that cost quadratic time): after a warm-up, an input
// whose check takes more than M3_NET_FUZZ_NS_PER_BYTE ns of this thread's CPU per byte (default
// 2000; 0: off), and more than the floor M3_NET_FUZZ_FLOOR_US (default 5000, so tiny inputs and
// allocator hiccups are not findings), is run twice more; when its fastest run is still over
// the bound it is a finding (abort). CPU time, not wall time: on a shared machine a preempted
// check would otherwise look slow (the first run here, at load 8, flagged a 75-byte input that
// takes 1 ms).
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tests/net/net_fuzz_targets.h"

namespace {

int g_only = -1;  // 0: HTTP only, 1: JSON only, -1: by the first byte
int64_t g_ns_per_byte = 2000;
int64_t g_floor_ns = 5'000'000;
constexpr uint64_t kWarmUpRuns = 2000;
uint64_t g_runs = 0;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

std::string Check(uint8_t first, std::string_view input) {
  const int target = g_only >= 0 ? g_only : first & 1;
  if (target == 0) return m3::net::fuzz::CheckHttpRequest(input, first >> 1);
  std::string problem = m3::net::fuzz::CheckRequestJson(input);
  if (problem.empty()) problem = m3::net::fuzz::CheckApiRequest(input, first >> 1);
  return problem;
}

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t TimedNs(uint8_t first, std::string_view input, std::string& problem) {
  const int64_t t0 = ThreadCpuNs();
  problem = Check(first, input);
  return ThreadCpuNs() - t0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* t = std::getenv("M3_NET_FUZZ_TARGET");
  if (t != nullptr && std::strcmp(t, "http") == 0) g_only = 0;
  if (t != nullptr && std::strcmp(t, "json") == 0) g_only = 1;
  g_ns_per_byte = EnvInt("M3_NET_FUZZ_NS_PER_BYTE", g_ns_per_byte);
  g_floor_ns = EnvInt("M3_NET_FUZZ_FLOOR_US", g_floor_ns / 1000) * 1000;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string problem;
  int64_t ns = TimedNs(data[0], input, problem);
  if (!problem.empty()) {
    std::fprintf(stderr, "property violated: %s\n", problem.c_str());
    std::abort();
  }
  if (g_ns_per_byte > 0 && ++g_runs > kWarmUpRuns) {
    const int64_t bound = std::max<int64_t>(g_floor_ns, g_ns_per_byte * static_cast<int64_t>(size));
    if (ns > bound) {
      for (int i = 0; i < 2; ++i) ns = std::min(ns, TimedNs(data[0], input, problem));
      if (ns > bound) {
        std::fprintf(
            stderr,
            "property violated: %zu bytes took %lld ns of CPU (%lld ns per byte), over the "
            "bound of %lld ns\n",
            size, static_cast<long long>(ns),
            static_cast<long long>(ns) / static_cast<long long>(size),
            static_cast<long long>(bound));
        std::abort();
      }
    }
  }
  return 0;
}
