// The gateway's request path and the engine as separate processes, on the bundled models:
// the demo model answers its sample pictures exactly as the reference did (eval.json `got`),
// and every chat-e2e conversation (text, one image, two images, multi-turn with the portrait
// picture) gives the reference's greedy ids.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace m3::test {
namespace {

using Json = nlohmann::ordered_json;

// Rewrites every media part to an OpenAI image_url part whose URL is `url` (the goldens keep
// either {"type": "image"} placeholders or paths relative to their folder).
Json WithImageUrl(Json messages, const std::string& url) {
  for (auto& m : messages) {
    if (!m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      if (part["type"] == "image" || part["type"] == "image_url") {
        part = {{"type", "image_url"}, {"image_url", {{"url", url}}}};
      }
    }
  }
  return messages;
}

// The goldens' image parts name files relative to their folder ("images/tall.png").
Json WithImagesIn(Json messages, const std::string& folder) {
  for (auto& m : messages) {
    if (!m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      if (part["type"] == "image_url") {
        const std::string url = part["image_url"]["url"].get<std::string>();
        part["image_url"]["url"] = folder + "/" + url;
      }
    }
  }
  return messages;
}

// prepare + generate; returns the generated ids.
std::vector<int64_t> Generate(const std::string& model, const Json& messages, int max_tokens,
                              const std::string& dir) {
  const std::string request = dir + "/request.json", inputs = dir + "/inputs.safetensors";
  WriteFile(request, Json{{"messages", messages}}.dump());
  const ProcessResult prep = RunProcess({BinPath("m3-gateway"), "prepare", "--model", model,
                                         "--request", request, "--output", inputs});
  INFO(prep.err);
  REQUIRE(prep.exit_code == 0);
  const ProcessResult gen =
      RunProcess({BinPath("m3-engine"), "generate", "--model", model, "--inputs", inputs,
                  "--max-new-tokens", std::to_string(max_tokens)});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  const std::string last = gen.out.substr(gen.out.find_last_of('{'));
  return Json::parse(last)["tokens"].get<std::vector<int64_t>>();
}

TEST_CASE("demo model: the sample pictures get the reference's answers") {
  const std::string dir = TempDir(), model = DataPath("demo-model/model");
  const Json eval = Json::parse(ReadFile(DataPath("demo-model/eval.json")));
  for (int i = 0; i < 8; ++i) {
    const Json& answer = eval["answers"][i];
    CAPTURE(i);
    const std::string picture = DataPath("demo-model/samples/sample" + std::to_string(i) + ".png");
    const std::vector<int64_t> ids =
        Generate(model, WithImageUrl(answer["question"], picture), 24, dir);
    WriteFile(dir + "/ids.json", Json(ids).dump());
    const ProcessResult text =
        RunProcess({BinPath("m3-gateway"), "detokenize", "--tokenizer", model + "/tokenizer.json",
                    "--ids-file", dir + "/ids.json", "--skip-special-tokens"});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out == answer["got"].get<std::string>());
  }
}

// chat_cases.json: the two_images and multi_turn completions are scripts/golden/
// chat_e2e_reference.py's rerun of the reference from this model directory. make_chat_golden.py
// generated them after `model.to(torch.bfloat16).save_pretrained(...); model.float()`, which left
// the text RoPE inv_freq buffer bf16-rounded; the rerun's model computes it in float32, as
// from_pretrained and the engine do (with the rounded buffer it gives the old completions).
TEST_CASE("chat-e2e: every conversation gives the reference's greedy ids") {
  const std::string dir = TempDir(), folder = DataPath("chat-e2e");
  const Json cases = Json::parse(ReadFile(folder + "/chat_cases.json"));
  int checked = 0;
  for (const Json& c : cases) {
    CAPTURE(c["name"].get<std::string>());
    const auto want = c["completion_ids"].get<std::vector<int64_t>>();
    CHECK(Generate(folder + "/model", WithImagesIn(c["messages"], folder),
                   static_cast<int>(want.size()), dir) == want);
    ++checked;
  }
  CHECK(checked == 4);
}

TEST_CASE("prepare: bad requests fail by name") {
  const std::string dir = TempDir(), model = DataPath("demo-model/model");
  WriteFile(dir + "/bad.json", R"({"messages": 3})");
  ProcessResult r = RunProcess({BinPath("m3-gateway"), "prepare", "--model", model, "--request",
                                dir + "/bad.json", "--output", dir + "/o.safetensors"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("\"messages\" list") != std::string::npos);
  WriteFile(dir + "/missing.json",
            R"({"messages": [{"role": "user", "content": [
                 {"type": "image_url", "image_url": {"url": "nowhere.png"}}]}]})");
  r = RunProcess({BinPath("m3-gateway"), "prepare", "--model", model, "--request",
                  dir + "/missing.json", "--output", dir + "/o.safetensors"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nowhere.png") != std::string::npos);
}

}  // namespace
}  // namespace m3::test
