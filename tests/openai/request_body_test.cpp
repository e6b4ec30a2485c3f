// Request bodies from untrusted clients: parsed in time linear in their size whatever their
// shape, refused at the first value over a structural limit (naming it), and a number that
// overflows a double refused with the field it was in.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "gateway/openai/request_body.h"

using namespace m3::openai;

namespace {

// Limits lifted far past every shape below, so the timing cases measure the parser itself.
ApiLimits Unbounded() {
  ApiLimits l;
  l.max_body_bytes = size_t{1} << 30;
  l.json.max_object_keys = size_t{1} << 30;
  l.json.max_array_items = size_t{1} << 30;
  l.json.max_values = size_t{1} << 30;
  l.json.max_tree_bytes = size_t{1} << 40;
  return l;
}

// {"k0":{"a":1},"k1":{"a":1},...}: each value an object, the shape that made nlohmann's
// callback parser rescan every sibling whenever one closed.
std::string ObjectOfObjects(size_t keys) {
  std::string s = "{";
  for (size_t i = 0; i < keys; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":{\"a\":1}";
  return s + "}";
}

// A chat request whose one message has `parts` text parts.
std::string ManyContentParts(size_t parts) {
  std::string s = R"({"model":"m3","messages":[{"role":"user","content":[)";
  for (size_t i = 0; i < parts; ++i)
    s += (i ? "," : "") + std::string(R"({"type":"text","text":"x"})");
  return s + "]}]}";
}

double SecondsToParse(const std::string& body, const ApiLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)ParseRequestBody(body, limits);
  } catch (const RequestError&) {
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

RequestError Refusal(const std::string& body, const ApiLimits& limits = {}) {
  try {
    (void)ParseRequestBody(body, limits);
  } catch (const RequestError& e) {
    return e;
  }
  FAIL("no error for a body of ", body.size(), " bytes");
  return RequestError(m3::ErrorCode::kInternal, "", "", "");
}

}  // namespace

TEST_CASE("parse time is linear in the number of sibling objects") {
  const ApiLimits limits = Unbounded();
  // Warm the allocator once so the first measurement is not the odd one out.
  (void)SecondsToParse(ObjectOfObjects(10000), limits);
  const double t40 = SecondsToParse(ObjectOfObjects(40000), limits);
  const double t160 = SecondsToParse(ObjectOfObjects(160000), limits);
  MESSAGE("40k keys: ", t40, " s; 160k keys: ", t160, " s");
  // Quadratic growth would make 4x the keys cost 16x (the old parser: 1.76 s -> ~28 s).
  CHECK(t160 < 4 * t40 * 2 + 0.1);
  CHECK(t160 < 1.5);
  const double parts = SecondsToParse(ManyContentParts(200000), limits);
  MESSAGE("200k content parts: ", parts, " s");
  CHECK(parts < 1.5);
}

TEST_CASE("default limits answer every hostile shape within the time bound") {
  const ApiLimits limits;  // what the gateway serves with
  for (size_t keys : {10000, 40000, 80000, 160000}) {
    const double t = SecondsToParse(ObjectOfObjects(keys), limits);
    CHECK_MESSAGE(t < 1.5, keys, " keys: ", t, " s");
  }
  CHECK(SecondsToParse(ManyContentParts(200000), limits) < 1.5);
  // 39 MB of 2.5M small objects in one array: refused at the first value over a limit.
  std::string big = R"({"model":"m3","prompt":[)";
  big.reserve(40u << 20);
  for (size_t i = 0; big.size() < (39u << 20); ++i) big += (i ? ",{\"a\":1}" : "{\"a\":1}");
  big += "]}";
  const double t = SecondsToParse(big, limits);
  MESSAGE("39 MB of small objects: ", t, " s");
  CHECK(t < 1.5);
  const RequestError e = Refusal(big);
  CHECK(e.http_status() == 413);
  CHECK(e.error_code() == "json_too_large");
}

TEST_CASE("structural limits are refused while parsing, naming the limit and the field") {
  ApiLimits limits;
  limits.json.max_object_keys = 3;
  limits.json.max_array_items = 4;
  limits.json.max_key_bytes = 8;
  limits.json.max_string_bytes = 10;
  limits.json.max_values = 20;

  RequestError e = Refusal(R"({"a":1,"b":2,"c":3,"d":4})", limits);
  CHECK(e.http_status() == 413);
  CHECK(e.error_code() == "json_too_large");
  CHECK(std::string(e.what()).find("more than 3 keys") != std::string::npos);

  e = Refusal(R"({"stop":[1,2,3,4,5]})", limits);
  CHECK(e.http_status() == 413);
  CHECK(std::string(e.what()).find("more than 4 items") != std::string::npos);
  CHECK(e.param() == "stop[4]");

  e = Refusal(R"({"very_long_key":1})", limits);
  CHECK(e.http_status() == 413);
  CHECK(std::string(e.what()).find("object key of 13 bytes") != std::string::npos);

  e = Refusal(R"({"messages":[{"content":"0123456789ab"}]})", limits);
  CHECK(e.http_status() == 413);
  CHECK(std::string(e.what()).find("string of 12 bytes") != std::string::npos);
  CHECK(e.param() == "messages[0].content");

  e = Refusal(R"({"a":[[1,2,3,4],[1,2,3,4],[1,2,3,4],[1,2,3,4]]})", limits);
  CHECK(e.http_status() == 413);
  CHECK(std::string(e.what()).find("more than 20 JSON values") != std::string::npos);

  // Depth keeps its 400 (an earlier hardening round's contract).
  limits = ApiLimits{};
  e = Refusal(std::string(100, '[') + std::string(100, ']'), limits);
  CHECK(e.http_status() == 400);
  CHECK(e.error_code() == "invalid_json");
  CHECK(std::string(e.what()).find("deeper than 64") != std::string::npos);

  // Within the limits the value is exactly nlohmann's (a repeated key keeps its last value).
  const Json j =
      ParseRequestBody(R"({"a":[1,-2,3.5,"x",null,true],"b":{"c":{}},"a2":1,"a2":2})", ApiLimits{});
  CHECK(j == Json::parse(R"({"a":[1,-2,3.5,"x",null,true],"b":{"c":{}},"a2":2})"));
}

TEST_CASE("a number too large for a double is a 400 naming its field") {
  RequestError e = Refusal(R"({"model":"m3","temperature":1e400})");
  CHECK(e.http_status() == 400);
  CHECK(e.type() == "invalid_request_error");
  CHECK(e.error_code() == "number_overflow");
  CHECK(e.param() == "temperature");

  e = Refusal(R"({"messages":[{"role":"user","content":"hi"},{"x":[0,-1e999]}]})");
  CHECK(e.http_status() == 400);
  CHECK(e.param() == "messages[1].x[1]");
  CHECK(std::string(e.what()).find("'messages[1].x[1]'") != std::string::npos);

  e = Refusal("-1e999");
  CHECK(e.http_status() == 400);
  CHECK(e.param() == "");
  CHECK(std::string(e.what()).find("a number in the body") != std::string::npos);
}

TEST_CASE(
    "a body whose parsed tree outgrows twice its size (and 64 MiB) is refused while parsing") {
  // 48 MB of tiny objects: ~8x in memory once parsed, over the 96 MB its size allows.
  std::string body = R"({"messages":[{"role":"user","content":[)";
  const std::string part = R"({"type":"text","text":"ab"},)";
  while (body.size() < (size_t{48} << 20)) body += part;
  body.back() = ']';
  body += "}]}";
  ApiLimits limits;
  limits.max_body_bytes = size_t{1} << 30;
  limits.json.max_values = size_t{1} << 30;
  limits.json.max_array_items = size_t{1} << 30;
  try {
    (void)ParseRequestBody(body, limits);
    FAIL("a 48 MB body of tiny objects was parsed whole");
  } catch (const RequestError& e) {
    CHECK(e.code() == m3::ErrorCode::kTooLarge);
    CHECK(std::string(e.what()).find("MiB of memory once parsed") != std::string::npos);
  }
  // The same shape under the 64 MiB floor parses: a legal prompt of short token ids ("1,")
  // expands as much.
  std::string ids = R"({"prompt":[)";
  for (int i = 0; i < 1000000; ++i) ids += "1,";
  ids.back() = ']';
  ids += "}";
  CHECK(ParseRequestBody(ids, limits)["prompt"].size() == 1000000);
}

TEST_CASE("a NUL byte ends no body early") {
  // nlohmann's lexer stops at a NUL: "0\0{{{" must not parse as 0 with the rest unread.
  const std::string body("{\"a\":0}\0{{{{", 12);
  try {
    (void)ParseRequestBody(body, ApiLimits{});
    FAIL("a body with a NUL byte was parsed");
  } catch (const RequestError& e) {
    CHECK(e.code() == m3::ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("NUL") != std::string::npos);
  }
}
