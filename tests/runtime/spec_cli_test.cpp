// `m3-engine generate` with speculative decoding: the same greedy tokens as without, and the
// counters line; the flags' errors.
#include <doctest/doctest.h>

#include <string>

#include "shared/safetensors.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

// The JSON array after "tokens": in generate's last stdout line.
std::string TokensOf(const std::string& out) {
  const size_t a = out.rfind("{\"tokens\":[");
  REQUIRE(a != std::string::npos);
  const size_t b = out.find(']', a);
  return out.substr(a, b - a + 1);
}

}  // namespace

TEST_CASE("generate --speculative-method ngram: same greedy tokens, counters printed") {
  const std::string dir = TempDir();
  const std::vector<int64_t> ids = {3,   1,  94,  100, 94, 324, 88,  210, 399, 382, 268, 431,
                                    438, 25, 2,   210, 1,  96,  411, 210, 343, 285, 270, 268,
                                    271, 76, 312, 42,  2,  210, 1,   76,  84,  210, 4,   210};
  NamedTensors in;
  in.emplace_back("input_ids", HostTensor::FromInt64({static_cast<int64_t>(ids.size())}, ids));
  WriteSafetensors(dir + "/in.safetensors", in);
  const std::vector<std::string> base = {BinPath("m3-engine"),
                                         "generate",
                                         "--model",
                                         DataPath("demo-model/model"),
                                         "--inputs",
                                         dir + "/in.safetensors",
                                         "--max-new-tokens",
                                         "40",
                                         "--ignore-eos",
                                         "--temperature",
                                         "0"};
  const ProcessResult plain = RunProcess(base);
  REQUIRE(plain.exit_code == 0);
  std::vector<std::string> spec = base;
  for (const char* a : {"--speculative-method", "ngram", "--num-speculative-tokens", "3"})
    spec.push_back(a);
  const ProcessResult r = RunProcess(spec);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(TokensOf(r.out) == TokensOf(plain.out));
  CHECK(r.out.find("\"speculative\":{\"proposed\":") != std::string::npos);
  CHECK(r.out.find("\"accepted\":0,") == std::string::npos);  // the demo repeats itself

  std::vector<std::string> bad = base;
  bad.push_back("--ngram-max");
  bad.push_back("3");
  ProcessResult e = RunProcess(bad);
  CHECK(e.exit_code == 2);
  CHECK(e.err.find("--ngram-max needs --speculative-method") != std::string::npos);
  bad = base;
  for (const char* a : {"--speculative-method", "medusa"}) bad.push_back(a);
  e = RunProcess(bad);
  CHECK(e.exit_code == 2);
  CHECK(e.err.find("eagle3, mtp, ngram") != std::string::npos);
}

}  // namespace m3::test
