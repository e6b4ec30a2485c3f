// ServedModel and ApiLimits: what request parsing checks a request against: the one model name
// this gateway serves, the sampling defaults its authors ship (generation_config.json), its
// context length, and the size limits that keep one request from taking unbounded memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shared/bounded_json.h"
#include "shared/generation_config.h"

namespace m3::openai {

struct ServedModel {
  std::string name;             // the "model" a request must name
  GenerationConfig generation;  // defaults for unset sampling fields
  int64_t max_model_len = 0;    // prompt + completion positions; 0: not known yet
  int64_t vocab_size = 0;       // token ids a request may name; 0: not checked
};

struct ApiLimits {
  size_t max_body_bytes = size_t{64} << 20;  // a body of data: URIs is large; 413 above
  JsonLimits json;  // structure of the body, applied while it is parsed (shared/bounded_json.h)
  size_t max_messages = 4096;
  size_t max_media_items = 32;  // images + videos per request (413 above)
  size_t max_stop_strings = 16;
  size_t max_stop_string_bytes = 1024;
  int max_top_logprobs = 20;  // OpenAI's limit
  size_t max_tools = 512;
  size_t max_logit_bias = 1024;
  int max_choices = 16;  // n: each choice is an engine request and an admission slot  // entries of
                         // logit_bias (OpenAI accepts up to 300)
};

}  // namespace m3::openai
