// `m3-engine serve --speculative-method ngram` over gRPC: the goldens' greedy tokens as without
// speculation, alone and together, and the speculative counters in Health.
#include <doctest/doctest.h>

#include <thread>

#include "tests/engine_server/grpc_test_client.h"
#include "tests/engine_server/server_process.h"
#include "tests/test_util.h"

namespace m3::test {

TEST_CASE("serve with n-gram speculation: the goldens' greedy tokens, counters in Health") {
  const SafetensorsFile cases = SafetensorsFile::Open(DataPath("m3-tiny/model_cases.safetensors"));
  ServerProcess server("m3-tiny/model",
                       {"--kv-pages", "128", "--speculative-method", "ngram",
                        "--num-speculative-tokens", "3", "--speculative-backoff", "off"});
  auto stub = server.Stub();
  std::vector<std::thread> threads;
  const char* const kCases[] = {"text", "image", "image2", "video"};
  std::vector<StreamResult> results(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back(
        [&, i] { results[i] = RunStream(*stub, GoldenRequest(cases, kCases[i])); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    CAPTURE(kCases[i]);
    REQUIRE_MESSAGE(results[i].status.ok(), results[i].status.error_message());
    CHECK(results[i].tokens == GoldenTokens(cases, kCases[i]));
  }
  CHECK(WaitPagesFree(*stub, 5000));
  const v1::HealthResponse h = Health(*stub);
  MESSAGE("m3-tiny through serve: " << h.spec_accepted_tokens() << " of " << h.spec_draft_tokens()
                                    << " drafts accepted in " << h.spec_verifies() << " verifies");
  CHECK(h.spec_draft_tokens() > 0);
  CHECK(h.spec_verifies() > 0);
  CHECK(h.spec_accepted_tokens() <= h.spec_draft_tokens());
}

TEST_CASE("serve refuses bad speculative flags with a message") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--speculative-method", "medusa"},
           {"--num-speculative-tokens", "3"},
           {"--speculative-method", "ngram", "--num-speculative-tokens", "99"},
           {"--speculative-method", "eagle3"}}) {
    std::vector<std::string> argv = {BinPath("m3-engine"),      "serve",  "--model",
                                     DataPath("m3-tiny/model"), "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = RunProcess(argv);
    CAPTURE(args[0]);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("speculative") != std::string::npos);
  }
}

}  // namespace m3::test
