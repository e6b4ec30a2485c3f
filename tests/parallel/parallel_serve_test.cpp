// `m3-engine serve --tensor-parallel 2 --expert-parallel 2` (CPU ranks) through gRPC: the
// goldens' greedy tokens (m3-tiny with tp 2 + ep 2, m3-alt with ep 2), each request alone and
// all at once (the second copies hit the prefix and encoder caches), pages freed at the end.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {
namespace {

const char* const kCases[] = {"text", "image", "image2", "video"};

const SafetensorsFile& Cases(const std::string& set) {
  static const SafetensorsFile tiny =
      SafetensorsFile::Open(DataPath("m3-tiny/model_cases.safetensors"));
  static const SafetensorsFile alt =
      SafetensorsFile::Open(DataPath("m3-alt/model_cases.safetensors"));
  return set == "m3-tiny" ? tiny : alt;
}

TEST_CASE("serve on parallel CPU ranks: the goldens' greedy tokens, alone and together") {
  struct Setup {
    std::string set;
    std::vector<std::string> flags;
  };
  for (const Setup& s : {Setup{"m3-tiny", {"--tensor-parallel", "2", "--expert-parallel", "2"}},
                         Setup{"m3-alt", {"--expert-parallel", "2"}}}) {
    CAPTURE(s.set);
    std::vector<std::string> args = {"--kv-pages", "128"};
    args.insert(args.end(), s.flags.begin(), s.flags.end());
    ServerProcess server(s.set + "/model", args);
    auto stub = server.Stub();
    for (const char* c : kCases) {
      CAPTURE(c);
      const v1::GenerateRequest req = GoldenRequest(Cases(s.set), c);
      StreamResult r = RunStream(*stub, req);
      REQUIRE_MESSAGE(r.status.ok(), r.status.error_message());
      CHECK(r.tokens == GoldenTokens(Cases(s.set), c));
      CHECK(r.last.completion_tokens() == static_cast<int>(r.tokens.size()));
    }
    std::vector<std::thread> threads;
    std::vector<StreamResult> results(8);
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        v1::GenerateRequest req = GoldenRequest(Cases(s.set), kCases[i % 4]);
        req.set_request_id(req.request_id() + std::to_string(i));
        results[i] = RunStream(*stub, req);
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      CHECK(results[i].status.ok());
      CHECK(results[i].tokens == GoldenTokens(Cases(s.set), kCases[i % 4]));
    }
    CHECK(WaitPagesFree(*stub, 5000));
    CHECK(Health(*stub).prefix_cache_hit_tokens() > 0);
  }
}

}  // namespace
}  // namespace m3::test
