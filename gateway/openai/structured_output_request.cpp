// The structured-output fields of OpenAI and vLLM requests (see structured_output_request.h).
#include "gateway/openai/structured_output_request.h"

#include <utility>

namespace m3::openai {
namespace {

using Kind = StructuredConstraint::Kind;

// A schema given as an object (OpenAI) or as JSON text (vLLM accepts both).
std::string SchemaText(const Json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    const Json parsed = Json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) {
      InvalidField(param,
                   "'" + param + "' must be a JSON schema (an object), got text that is not");
    }
    return parsed.dump();
  }
  InvalidField(param,
               "'" + param + "' must be a JSON schema object, got " + std::string(JsonTypeName(v)),
               "invalid_type");
}

std::string NonEmptyString(const Json& v, const std::string& param) {
  if (!v.is_string()) {
    InvalidField(param, "'" + param + "' must be a string, got " + std::string(JsonTypeName(v)),
                 "invalid_type");
  }
  if (v.get<std::string>().empty()) InvalidField(param, "'" + param + "' must not be empty");
  return v.get<std::string>();
}

std::vector<std::string> Choices(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) {
    InvalidField(param, "'" + param + "' must be a non-empty list of strings",
                 v.is_array() ? "invalid_value" : "invalid_type");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_string()) {
      InvalidField(p, "'" + p + "' must be a string, got " + std::string(JsonTypeName(v[i])),
                   "invalid_type");
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

class Collector {
 public:
  void Add(StructuredConstraint c) {
    if (got_) {
      InvalidField(c.param, "'" + c.param + "' and '" + got_->param +
                                "' both constrain the output; give at most one");
    }
    got_ = std::move(c);
  }
  std::optional<StructuredConstraint> Take() { return std::move(got_); }

 private:
  std::optional<StructuredConstraint> got_;
};

StructuredConstraint Make(Kind kind, std::string param, std::string text = "") {
  StructuredConstraint c;
  c.kind = kind;
  c.param = std::move(param);
  c.text = std::move(text);
  return c;
}

void ParseResponseFormat(const FieldReader& body, Collector& out) {
  const Json* format = body.Object("response_format");
  if (!format) return;
  FieldReader r(*format, "response_format");
  const std::string type = r.RequiredString("type");
  if (type == "text") return;
  if (type == "json_object") return out.Add(Make(Kind::kJsonObject, "response_format"));
  if (type == "json_schema") {
    const Json* js = r.Object("json_schema");
    if (!js) {
      InvalidField("response_format.json_schema", "'response_format.json_schema' is required",
                   "missing_required_parameter");
    }
    FieldReader s(*js, "response_format.json_schema");
    if (s.RequiredString("name").empty()) {
      InvalidField("response_format.json_schema.name",
                   "'response_format.json_schema.name' must not be empty");
    }
    (void)s.String("description");
    const Json* schema = s.Get("schema");
    StructuredConstraint c =
        Make(Kind::kJsonSchema, "response_format.json_schema.schema",
             schema ? SchemaText(*schema, "response_format.json_schema.schema") : "{}");
    // OpenAI's strict mode never writes unlisted properties; without it the schema's own
    // additionalProperties decides.
    c.strict = s.Bool("strict").value_or(false);
    return out.Add(std::move(c));
  }
  InvalidField("response_format.type",
               "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got "
               "\"" +
                   type + "\"");
}

void ParseVllm(const FieldReader& body, Collector& out) {
  if (const Json* so = body.Object("structured_outputs")) {
    FieldReader r(*so, "structured_outputs");
    if (const Json* v = r.Get("json"); v && !v->is_null())
      out.Add(Make(Kind::kJsonSchema, "structured_outputs.json",
                   SchemaText(*v, "structured_outputs.json")));
    if (const Json* v = r.Get("regex"); v && !v->is_null())
      out.Add(Make(Kind::kRegex, "structured_outputs.regex",
                   NonEmptyString(*v, "structured_outputs.regex")));
    if (const Json* v = r.Get("choice"); v && !v->is_null()) {
      StructuredConstraint c = Make(Kind::kChoice, "structured_outputs.choice");
      c.choices = Choices(*v, "structured_outputs.choice");
      out.Add(std::move(c));
    }
    if (const Json* v = r.Get("grammar"); v && !v->is_null())
      out.Add(Make(Kind::kGrammar, "structured_outputs.grammar",
                   NonEmptyString(*v, "structured_outputs.grammar")));
    if (r.Bool("json_object").value_or(false))
      out.Add(Make(Kind::kJsonObject, "structured_outputs.json_object"));
    if (const Json* v = r.Get("structural_tag"); v && !v->is_null()) {
      InvalidField("structured_outputs.structural_tag",
                   "'structured_outputs.structural_tag' is not supported; use tool_choice to "
                   "force tool calls",
                   "unsupported_parameter");
    }
    (void)r.Bool("disable_any_whitespace");
    (void)r.Bool("disable_fallback");
    (void)r.Bool("disable_additional_properties");
    (void)r.String("whitespace_pattern");
  }
  if (const Json* v = body.Get("guided_json"); v && !v->is_null())
    out.Add(Make(Kind::kJsonSchema, "guided_json", SchemaText(*v, "guided_json")));
  if (const Json* v = body.Get("guided_regex"); v && !v->is_null())
    out.Add(Make(Kind::kRegex, "guided_regex", NonEmptyString(*v, "guided_regex")));
  if (const Json* v = body.Get("guided_choice"); v && !v->is_null()) {
    StructuredConstraint c = Make(Kind::kChoice, "guided_choice");
    c.choices = Choices(*v, "guided_choice");
    out.Add(std::move(c));
  }
  if (const Json* v = body.Get("guided_grammar"); v && !v->is_null())
    out.Add(Make(Kind::kGrammar, "guided_grammar", NonEmptyString(*v, "guided_grammar")));
  (void)body.String("guided_decoding_backend");
  (void)body.String("guided_whitespace_pattern");
}

}  // namespace

std::optional<StructuredConstraint> ParseStructuredOutput(const FieldReader& body) {
  Collector out;
  ParseResponseFormat(body, out);
  ParseVllm(body, out);
  return out.Take();
}

}  // namespace m3::openai
