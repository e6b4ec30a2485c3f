// The fields every generation endpoint shares: "model" (must name the served model; 404
// otherwise), "stream" and "stream_options", and the OpenAI options this server cannot honour
// (audio output), which are refused rather than silently ignored.
#pragma once

#include <string>

#include "gateway/openai/field_reader.h"
#include "gateway/openai/served_model.h"

namespace m3::openai {

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;  // a final chunk with usage (and "usage": null on the others)
};

// The served name when "model" is absent; throws RequestError 404 "model_not_found" for
// another name.
std::string ParseModel(const FieldReader& body, const ServedModel& model);

// Throws RequestError 400 for wrong types, and for stream_options without stream = true.
StreamOptions ParseStreamOptions(const FieldReader& body);

// Throws RequestError 400 "unsupported_parameter" for an option that would change the output in
// a way this server does not implement.
void RejectUnsupported(const FieldReader& body);

}  // namespace m3::openai
