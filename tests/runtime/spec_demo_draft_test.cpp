// The demo model's trained EAGLE-3 draft (tests/data/demo-model/eagle3) on its own pictures, as
// a user runs it: `m3-gateway prepare` (chat template, the picture preprocessed) then
// `m3-engine generate` with and without `--speculative-method eagle3` at k = 3: the same greedy
// tokens, and at least 60% of the proposed drafts accepted (issue 37's bar).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/test_util.h"

namespace m3::test {

TEST_CASE("the demo's EAGLE-3 draft on its pictures: exact tokens, >= 60% of drafts accepted") {
  const std::string model = DataPath("demo-model/model"), samples = DataPath("demo-model/samples");
  const std::string dir = TempDir();
  int64_t proposed = 0, accepted = 0;
  for (int i = 0; i < 8; i += 2) {
    for (const char* q : {"What colour is the object in the picture?", "Describe it in one line.",
                          "What shape is this?"}) {
      CAPTURE(i);
      CAPTURE(q);
      const nlohmann::json req = {
          {"messages",
           {{{"role", "user"},
             {"content",
              {{{"type", "image_url"},
                {"image_url",
                 {{"url", "file://" + samples + "/sample" + std::to_string(i) + ".png"}}}},
               {{"type", "text"}, {"text", q}}}}}}},
          {"add_generation_prompt", true}};
      WriteFile(dir + "/req.json", req.dump());
      const ProcessResult prep = RunProcess(
          {BinPath("m3-gateway"), "prepare", "--model", model, "--request", dir + "/req.json",
           "--output", dir + "/in.safetensors", "--allow-local-media", samples});
      REQUIRE_MESSAGE(prep.exit_code == 0, prep.err);
      const std::vector<std::string> base = {
          BinPath("m3-engine"),    "generate",         "--model", model,           "--inputs",
          dir + "/in.safetensors", "--max-new-tokens", "32",      "--temperature", "0"};
      const ProcessResult plain = RunProcess(base);
      REQUIRE_MESSAGE(plain.exit_code == 0, plain.err);
      std::vector<std::string> spec = base;
      for (const char* a : {"--speculative-method", "eagle3", "--num-speculative-tokens", "3",
                            "--speculative-backoff", "off"})
        spec.push_back(a);
      spec.push_back("--speculative-model");
      spec.push_back(DataPath("demo-model/eagle3"));
      const ProcessResult sr = RunProcess(spec);
      REQUIRE_MESSAGE(sr.exit_code == 0, sr.err);
      const auto last_line = [](const std::string& out) {
        const size_t at = out.rfind("{\"tokens\"");
        REQUIRE(at != std::string::npos);
        return nlohmann::json::parse(out.substr(at));
      };
      const nlohmann::json a = last_line(plain.out), b = last_line(sr.out);
      CHECK(a["tokens"] == b["tokens"]);
      proposed += b["speculative"]["proposed"].get<int64_t>();
      accepted += b["speculative"]["accepted"].get<int64_t>();
    }
  }
  const double rate = static_cast<double>(accepted) / static_cast<double>(proposed);
  MESSAGE("demo EAGLE-3 draft, k = 3: " << accepted << " of " << proposed << " drafts accepted ("
                                        << rate << ")");
  CHECK(proposed > 0);
  CHECK(rate >= 0.6);
}

}  // namespace m3::test
