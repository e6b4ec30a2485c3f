// Typed request fields with errors that name the field (see field_reader.h).
#include "gateway/openai/field_reader.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace m3::openai {
namespace {

std::string FormatNumber(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::string Cat(std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (auto p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (auto p : parts) out.append(p);
  return out;
}

void InvalidField(const std::string& param, const std::string& message, std::string code) {
  throw RequestError(ErrorCode::kInvalidArgument, message, param, std::move(code));
}

FieldReader::FieldReader(const Json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    InvalidField(path_,
                 Cat({path_.empty() ? "the request body" : Cat({"'", path_, "'"}),
                      " must be a JSON object, got ", JsonTypeName(object_)}),
                 "invalid_type");
  }
}

std::string FieldReader::Path(std::string_view name) const {
  return path_.empty() ? std::string(name) : Cat({path_, ".", name});
}

const Json* FieldReader::Get(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::Has(std::string_view name) const {
  return Get(name) != nullptr;
}

namespace {

[[noreturn]] void WrongType(const std::string& param, std::string_view want, const Json& got) {
  InvalidField(param, Cat({"'", param, "' must be ", want, ", got ", JsonTypeName(got)}),
               "invalid_type");
}

}  // namespace

std::optional<bool> FieldReader::Bool(std::string_view name) const {
  const Json* v = Get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) WrongType(Path(name), "a boolean", *v);
  return v->get<bool>();
}

std::optional<int64_t> FieldReader::Int(std::string_view name, int64_t min, int64_t max) const {
  const Json* v = Get(name);
  if (!v) return std::nullopt;
  const std::string param = Path(name);
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    // Non-negative integers parse as unsigned: both bounds apply here too.
    if (min > 0 && u < static_cast<uint64_t>(min)) {
      InvalidField(param, Cat({"'", param, "' must be between ", std::to_string(min), " and ",
                               std::to_string(max), ", got ", std::to_string(u)}));
    }
    if (u > static_cast<uint64_t>(max)) {
      InvalidField(param, Cat({"'", param, "' must be at most ", std::to_string(max), ", got ",
                               std::to_string(u)}));
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) WrongType(param, "an integer", *v);
  const int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    InvalidField(param, Cat({"'", param, "' must be between ", std::to_string(min), " and ",
                             std::to_string(max), ", got ", std::to_string(i)}));
  }
  return i;
}

std::optional<double> FieldReader::Number(std::string_view name, double min, double max,
                                          bool min_exclusive) const {
  const Json* v = Get(name);
  if (!v) return std::nullopt;
  const std::string param = Path(name);
  if (!v->is_number()) WrongType(param, "a number", *v);
  const double d = v->get<double>();
  const bool low_ok = min_exclusive ? d > min : d >= min;
  if (!std::isfinite(d) || !low_ok || d > max) {
    InvalidField(param, Cat({"'", param, "' must be ", min_exclusive ? "greater than " : "between ",
                             FormatNumber(min), min_exclusive ? " and at most " : " and ",
                             FormatNumber(max), ", got ", FormatNumber(d)}));
  }
  return d;
}

std::optional<std::string> FieldReader::String(std::string_view name) const {
  const Json* v = Get(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) WrongType(Path(name), "a string", *v);
  return v->get<std::string>();
}

std::string FieldReader::RequiredString(std::string_view name) const {
  auto s = String(name);
  if (!s) {
    InvalidField(Path(name), Cat({"'", Path(name), "' is required"}), "missing_required_parameter");
  }
  return *s;
}

const Json* FieldReader::Object(std::string_view name) const {
  const Json* v = Get(name);
  if (v && !v->is_object()) WrongType(Path(name), "an object", *v);
  return v;
}

const Json* FieldReader::Array(std::string_view name) const {
  const Json* v = Get(name);
  if (v && !v->is_array()) WrongType(Path(name), "an array", *v);
  return v;
}

}  // namespace m3::openai
