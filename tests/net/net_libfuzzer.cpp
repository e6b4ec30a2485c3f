// libFuzzer entry point for the network fuzz properties (net_fuzz_targets.h). The first byte
// seeds the byte splits and, unless M3_NET_FUZZ_TARGET is "http" or "json", also picks the
// target (even: the HTTP request parser, odd: the JSON request parsers). A property violation
// aborts with the reason, so libFuzzer saves the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tests/net/net_fuzz_targets.h"

namespace {

int g_only = -1;  // 0: HTTP only, 1: JSON only, -1: by the first byte

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* t = std::getenv("M3_NET_FUZZ_TARGET");
  if (t != nullptr && std::strcmp(t, "http") == 0) g_only = 0;
  if (t != nullptr && std::strcmp(t, "json") == 0) g_only = 1;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int target = g_only >= 0 ? g_only : data[0] & 1;
  const std::string problem = target == 0 ? m3::net::fuzz::CheckHttpRequest(input, data[0] >> 1)
                                          : m3::net::fuzz::CheckRequestJson(input);
  if (!problem.empty()) {
    std::fprintf(stderr, "property violated: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
