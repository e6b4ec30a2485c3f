// Text completion bodies: the prompt forms, the legacy logprobs field, and their errors.
#include <doctest/doctest.h>

#include "gateway/openai/completion_request.h"
#include "gateway/openai/request_body.h"

using namespace m3::openai;

namespace {

ServedModel Model() {
  ServedModel m;
  m.name = "m3";
  return m;
}

CompletionRequest Parse(const std::string& body) {
  return ParseCompletionRequest(ParseRequestBody(body, {}), Model(), {}, 100);
}

void Fails(const std::string& body, int status, const std::string& param, const std::string& code) {
  try {
    Parse(body);
  } catch (const RequestError& e) {
    CHECK_MESSAGE(e.http_status() == status, body, ": ", e.what());
    CHECK_MESSAGE(e.param() == param, body, ": ", e.what());
    CHECK_MESSAGE(e.error_code() == code, body, ": ", e.what());
    return;
  }
  FAIL("no error for ", body);
}

}  // namespace

TEST_CASE("prompt forms") {
  CompletionRequest r = Parse(R"({"model":"m3","prompt":"Once","max_tokens":3})");
  CHECK(r.prompt == "Once");
  CHECK_FALSE(r.prompt_is_ids);
  CHECK(r.sampling.max_tokens == 3);
  r = Parse(R"({"prompt":["Once"]})");
  CHECK(r.prompt == "Once");
  r = Parse(R"({"prompt":[1,2,99]})");
  CHECK(r.prompt_is_ids);
  CHECK(r.prompt_ids == std::vector<int32_t>{1, 2, 99});
  r = Parse(R"({"prompt":[[4,5]]})");
  CHECK(r.prompt_ids == std::vector<int32_t>{4, 5});
  r = Parse(R"({"prompt":"x","logprobs":2,"stream":true,"stream_options":{"include_usage":true}})");
  CHECK(r.sampling.logprobs);
  CHECK(r.sampling.top_logprobs == 2);
  CHECK(r.stream.include_usage);
}

TEST_CASE("completion errors") {
  Fails(R"({"model":"m3"})", 400, "prompt", "missing_required_parameter");
  Fails(R"({"prompt":5})", 400, "prompt", "invalid_type");
  Fails(R"({"prompt":[]})", 400, "prompt", "invalid_value");
  Fails(R"({"prompt":["a","b"]})", 400, "prompt", "unsupported_value");
  Fails(R"({"prompt":[1,"a"]})", 400, "prompt[1]", "invalid_type");
  Fails(R"({"prompt":[1,100]})", 400, "prompt[1]", "invalid_value");
  Fails(R"({"prompt":[-1]})", 400, "prompt[0]", "invalid_value");
  Fails(R"({"prompt":"x","logprobs":6})", 400, "logprobs", "invalid_value");
  Fails(R"({"prompt":"x","logprobs":true})", 400, "logprobs", "invalid_type");
  Fails(R"({"prompt":"x","echo":true})", 400, "echo", "unsupported_parameter");
  Fails(R"({"prompt":"x","suffix":"y"})", 400, "suffix", "unsupported_parameter");
  Fails(R"({"prompt":"x","n":17})", 400, "n", "invalid_value");
  Fails(R"({"prompt":"x","model":"other"})", 404, "model", "model_not_found");
  Fails(R"({"prompt":"x","max_tokens":-5})", 400, "max_tokens", "invalid_value");
}
