// Shared request fields (see request_common.h).
#include "gateway/openai/request_common.h"

namespace m3::openai {

std::string ParseModel(const FieldReader& body, const ServedModel& model) {
  auto name = body.String("model");
  if (!name) return model.name;
  if (*name != model.name) {
    throw RequestError(
        ErrorCode::kNotFound,
        "the model '" + *name + "' does not exist; this server serves '" + model.name + "'",
        "model", "model_not_found");
  }
  return *name;
}

StreamOptions ParseStreamOptions(const FieldReader& body) {
  StreamOptions out;
  if (auto v = body.Bool("stream")) out.stream = *v;
  if (const Json* opts = body.Object("stream_options")) {
    if (!out.stream) {
      InvalidField("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    FieldReader r(*opts, "stream_options");
    if (auto v = r.Bool("include_usage")) out.include_usage = *v;
    (void)r.Bool("continuous_usage_stats");  // type-checked; usage comes once, at the end
  }
  return out;
}

void RejectUnsupported(const FieldReader& body) {
  auto unsupported = [](const std::string& param, const std::string& why) {
    InvalidField(param, "'" + param + "' is not supported: " + why, "unsupported_parameter");
  };
  if (body.Has("audio")) unsupported("audio", "this model produces text only");
  if (const Json* modalities = body.Array("modalities")) {
    for (const Json& m : *modalities) {
      if (!m.is_string() || m.get<std::string>() != "text") {
        unsupported("modalities", "this model produces text only");
      }
    }
  }
}

}  // namespace m3::openai
