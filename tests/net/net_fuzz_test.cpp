// Deterministic mutation fuzzing of the HTTP request parser (request line, header fields,
// Content-Length and chunked bodies, chunk extensions, trailers) and the JSON request parsers,
// checking the properties in net_fuzz_targets.h. Seeds are hand-written requests; each case
// applies a few mutations drawn from std::mt19937_64 keyed by (target, case number), so any
// failure replays exactly. M3_NET_FUZZ_CASES sets the cases per target (default 40000, a
// fraction of a second; long runs use millions, in the sanitizer build, see docs/PERF.md);
// M3_NET_FUZZ_FIRST starts at a later case.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/net/net_fuzz_targets.h"

namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

std::vector<std::string> HttpSeeds() {
  return {
      "GET /health HTTP/1.1\r\nHost: localhost:8000\r\n\r\n",
      "POST /v1/preprocess HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 15\r\n\r\n{\"content\": []}",
      "POST /v1/preprocess HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;name=value\r\nabcd\r\n3\r\nefg\r\n0\r\nX-Checksum: 123\r\nX-Other: a b\r\n\r\n",
      "POST / HTTP/1.0\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
      "\r\nOPTIONS * HTTP/1.1\nHost: [::1]:80\nExpect: 100-continue\nContent-Length: 2\n\nok",
      "GET http://example.com:8080/path?q=1 HTTP/1.1\r\nHost: ignored\r\n\r\n",
      "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4, 4\r\n\r\nbodyGET / HTTP/1.1\r\n"
      "Host: y\r\n\r\n",
  };
}

std::vector<std::string> JsonSeeds() {
  return {
      R"({"content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":)"
      R"("data:image/png;base64,iVBORw0KGgo="}},{"type":"video_url","video_url":)"
      R"("https://example.com/v.mp4"}],"min_pixels":3136,"max_pixels":50176,"fps":2.5,)"
      R"("min_frames":2,"max_frames":8,"all_frames":false,"response_format":"json"})",
      R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":)"
      R"("file:///tmp/a.png"}]},{"role":"assistant","content":"ok"}],)"
      R"("response_format":"safetensors"})",
      R"({"content":[{"type":"image_url","image_url":{"url":"http://a/b\u0000.png"}}],)"
      R"("max_pixels":1e300,"fps":-0.0})",
  };
}

// OpenAI and Anthropic requests for the API request readers (CheckApiRequest).
std::vector<std::string> ApiSeeds() {
  return {
      R"({"model":"m3","messages":[{"role":"system","content":"be brief"},{"role":"user",)"
      R"("content":[{"type":"text","text":"hi \u00e9"},{"type":"image_url","image_url":)"
      R"({"url":"https://a/b.png","detail":"low"}}]},{"role":"assistant","content":null,)"
      R"("tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"42"}],"tools":[{"type":"function",)"
      R"("function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":)"
      R"("string"}}}}}],"tool_choice":"auto","temperature":0.7,"top_p":0.9,"max_tokens":16,)"
      R"("stop":["

"],"stream":true,"stream_options":{"include_usage":true},"seed":-1,)"
      R"("logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":false}})",
      R"({"model":"m3","prompt":[[1,2,3],[4]],"max_tokens":8,"echo":false,"n":1,)"
      R"("presence_penalty":-2,"frequency_penalty":0.5,"logprobs":1,"suffix":null})",
      R"({"model":"m3","max_tokens":32,"system":[{"type":"text","text":"sys"}],"messages":[)"
      R"({"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":)"
      R"({"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"role":)"
      R"("assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},)"
      R"({"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":)"
      R"([{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}],"tools":[{"name":"f",)"
      R"("input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},)"
      R"("thinking":{"type":"enabled","budget_tokens":1024},"stop_sequences":["X"],)"
      R"("top_k":5,"stream":false,"metadata":{"user_id":"u"}})",
  };
}

// Tokens that matter to the grammar, for insertion at random places.
const std::vector<std::string>& Tokens(bool http) {
  static const std::vector<std::string> kHttp = {"\r\n",
                                                 "\n",
                                                 "\r",
                                                 " ",
                                                 "\t",
                                                 ":",
                                                 ";",
                                                 ",",
                                                 "\0",
                                                 "0\r\n\r\n",
                                                 "chunked",
                                                 "Transfer-Encoding: ",
                                                 "Content-Length: ",
                                                 "Host: x\r\n",
                                                 "HTTP/1.1",
                                                 "HTTP/1.0",
                                                 "ffffffffffffffff",
                                                 "18446744073709551616",
                                                 "100-continue",
                                                 "\r\n\r\n",
                                                 "\x80\xff",
                                                 " HTTP/9.9",
                                                 "identity",
                                                 "Expect: ",
                                                 "=\"q\"",
                                                 "GET / HTTP/1.1\r\n",
                                                 "%00",
                                                 "*"};
  static const std::vector<std::string> kJson = {"{",
                                                 "}",
                                                 "[",
                                                 "]",
                                                 "\"",
                                                 "\\",
                                                 "\\u0000",
                                                 "\\ud800",
                                                 ",",
                                                 ":",
                                                 "null",
                                                 "true",
                                                 "1e999",
                                                 "-1",
                                                 "0",
                                                 "18446744073709551615",
                                                 "\"image_url\"",
                                                 "\"video_url\"",
                                                 "\"url\"",
                                                 "\"type\"",
                                                 "\"content\"",
                                                 "\"messages\"",
                                                 "data:",
                                                 "http://",
                                                 "\xff",
                                                 "[[[[[[[[",
                                                 "{\"a\":{\"a\":{\"a\":"};
  return http ? kHttp : kJson;
}

std::string Mutate(const std::string& seed, std::mt19937_64& rng,
                   const std::vector<std::string>& all, bool http) {
  std::string m = seed;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const std::vector<std::string>& tokens = Tokens(http);
  const int count = 1 + static_cast<int>(rng() % (rng() % 6 == 0 ? 12 : 3));
  for (int k = 0; k < count; ++k) {
    switch (rng() % 9) {
      case 0:
        if (!m.empty()) m[pick(m.size())] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:
        if (!m.empty()) m[pick(m.size())] = static_cast<char>(rng() & 0xff);
        break;
      case 2:
        m.resize(pick(m.size() + 1));
        break;
      case 3:
      case 4:
        m.insert(pick(m.size() + 1), tokens[pick(tokens.size())]);
        break;
      case 5: {  // repeat a piece (long lines, many fields, deep nesting)
        if (m.empty()) break;
        const size_t at = pick(m.size());
        const size_t len = 1 + pick(std::min<size_t>(m.size() - at, 32));
        const std::string piece = m.substr(at, len);
        const size_t times = 1 + pick(rng() % 4 == 0 ? 3000 : 8);
        std::string run;
        for (size_t i = 0; i < times; ++i) run += piece;
        m.insert(at, run);
        break;
      }
      case 6:
        if (!m.empty()) {
          const size_t at = pick(m.size());
          m.erase(at, 1 + pick(std::min<size_t>(m.size() - at, 16)));
        }
        break;
      case 7: {  // splice another seed's tail
        const std::string& other = all[pick(all.size())];
        m = m.substr(0, pick(m.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      case 8: {  // a decimal or hex number somewhere
        static const char* kNumbers[] = {"0",    "1",    "65535", "65536",      "4096",
                                         "4097", "ffff", "10000", "9999999999", "-5"};
        m.insert(pick(m.size() + 1), kNumbers[pick(std::size(kNumbers))]);
        break;
      }
    }
  }
  return m;
}

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 400)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

template <typename Check>
void Fuzz(const char* name, const std::vector<std::string>& seeds, bool http, Check&& check) {
  const int64_t cases = EnvInt("M3_NET_FUZZ_CASES", 40000);
  const int64_t first = EnvInt("M3_NET_FUZZ_FIRST", 0);
  int64_t failures = 0;
  for (const std::string& seed : seeds) {
    const std::string problem = check(seed, 0);
    CHECK_MESSAGE(problem.empty(), name << " seed: " << problem);
  }
  for (int64_t i = first; i < first + cases; ++i) {
    std::mt19937_64 rng(static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + (http ? 1 : 2));
    const std::string& seed = seeds[static_cast<size_t>(rng() % seeds.size())];
    const std::string input = Mutate(seed, rng, seeds, http);
    const std::string problem = check(input, static_cast<uint64_t>(i));
    if (!problem.empty()) {
      ++failures;
      FAIL_CHECK(name << " case " << i << ": " << problem << "\ninput: " << Printable(input));
      if (failures > 10) break;
    }
  }
  MESSAGE(name << ": " << cases << " cases from " << first << ", " << failures << " failures");
}

}  // namespace

TEST_CASE("net fuzz: HTTP request parser") {
  Fuzz("http", HttpSeeds(), true, [](const std::string& input, uint64_t seed) {
    return m3::net::fuzz::CheckHttpRequest(input, seed);
  });
}

TEST_CASE("net fuzz: API request readers (chat, completions, messages)") {
  Fuzz("api", ApiSeeds(), false, [](const std::string& input, uint64_t i) {
    return m3::net::fuzz::CheckApiRequest(input, static_cast<uint8_t>(i));
  });
}

TEST_CASE("net fuzz: JSON request parsers") {
  Fuzz("json", JsonSeeds(), false,
       [](const std::string& input, uint64_t) { return m3::net::fuzz::CheckRequestJson(input); });
}
