// ValidateJson: the keywords the grammar suite's schemas use, checked directly on the value.
#include "tests/grammar/schema_validator.h"

#include <cmath>
#include <regex>

namespace m3::test {

namespace {

using Json = nlohmann::ordered_json;

const Json* Pointer(const Json& root, const std::string& ref) {
  if (ref == "#") return &root;
  if (ref.rfind("#/", 0) != 0) return nullptr;
  const Json* node = &root;
  size_t i = 2;
  while (i <= ref.size()) {
    size_t j = ref.find('/', i);
    if (j == std::string::npos) j = ref.size();
    std::string key = ref.substr(i, j - i);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    i = j + 1;
  }
  return node;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool Fail(std::string& why, const std::string& text) {
  why = text;
  return false;
}

bool FormatOk(const std::string& format, const std::string& s) {
  static const std::regex date(R"(^\d{4}-\d{2}-\d{2}$)");
  static const std::regex time(R"(^\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)");
  static const std::regex datetime(
      R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)");
  static const std::regex email(R"(^[^@\s]+@[^@\s]+\.[A-Za-z]+$)");
  static const std::regex uuid(R"(^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$)");
  auto range_ok = [](const std::string& x, int lo, int hi) {
    int v = std::stoi(x);
    return v >= lo && v <= hi;
  };
  if (format == "date") {
    return std::regex_match(s, date) && range_ok(s.substr(5, 2), 1, 12) &&
           range_ok(s.substr(8, 2), 1, 31);
  }
  if (format == "time") {
    return std::regex_match(s, time) && range_ok(s.substr(0, 2), 0, 23) &&
           range_ok(s.substr(3, 2), 0, 59) && range_ok(s.substr(6, 2), 0, 59);
  }
  if (format == "date-time") return std::regex_match(s, datetime);
  if (format == "email") return std::regex_match(s, email);
  if (format == "uuid") return std::regex_match(s, uuid);
  if (format == "ipv4") {
    int parts = 0;
    size_t i = 0;
    while (i <= s.size()) {
      size_t j = s.find('.', i);
      if (j == std::string::npos) j = s.size();
      std::string p = s.substr(i, j - i);
      if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
      for (char c : p)
        if (!isdigit(static_cast<unsigned char>(c))) return false;
      if (std::stoi(p) > 255) return false;
      ++parts;
      i = j + 1;
    }
    return parts == 4;
  }
  return true;
}

bool TypeOk(const Json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

}  // namespace

bool ValidateJson(const Json& v, const Json& s, const Json& root, std::string& why) {
  if (s.is_boolean()) return s.get<bool>() || Fail(why, "schema false");
  if (s.contains("$ref")) {
    const Json* target = Pointer(root, s["$ref"].get<std::string>());
    if (!target) return Fail(why, "unresolved $ref");
    if (!ValidateJson(v, *target, root, why)) return false;
  }
  if (s.contains("const") && !(v == s["const"])) return Fail(why, "const mismatch: " + v.dump());
  if (s.contains("enum")) {
    bool any = false;
    for (const auto& e : s["enum"]) any |= (v == e);
    if (!any) return Fail(why, "not in enum: " + v.dump());
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    int matched = 0;
    std::string last;
    for (const auto& sub : s[key]) {
      Json merged = sub;
      for (auto& [k, x] : s.items())
        if (k != key && k != "$ref" && merged.is_object() && !merged.contains(k)) merged[k] = x;
      std::string w;
      if (ValidateJson(v, merged, root, w))
        ++matched;
      else
        last = w;
    }
    if (matched == 0) return Fail(why, std::string(key) + ": no branch matches (" + last + ")");
    if (std::string(key) == "oneOf" && matched > 1) return Fail(why, "oneOf: several match");
    return true;
  }
  if (s.contains("allOf"))
    for (const auto& sub : s["allOf"])
      if (!ValidateJson(v, sub, root, why)) return false;
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) {
      ok = TypeOk(v, s["type"].get<std::string>());
    } else {
      for (const auto& t : s["type"]) ok |= TypeOk(v, t.get<std::string>());
    }
    if (s.value("nullable", false) && v.is_null()) ok = true;
    if (!ok) return Fail(why, "wrong type: " + v.dump());
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& r : s["required"])
        if (!v.contains(r.get<std::string>()))
          return Fail(why, "missing required " + r.get<std::string>());
    bool has_props = false;
    for (const auto* sch : {&s}) has_props = sch->contains("properties");
    for (auto& [k, x] : v.items()) {
      if (has_props && s["properties"].contains(k)) {
        if (!ValidateJson(x, s["properties"][k], root, why)) return Fail(why, k + ": " + why);
      } else if (s.contains("additionalProperties")) {
        // allOf members may list properties elsewhere: count those as known.
        bool known = false;
        if (s.contains("allOf"))
          for (const auto& sub : s["allOf"])
            known |= sub.contains("properties") && sub["properties"].contains(k);
        if (known) continue;
        const auto& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return Fail(why, "extra property " + k);
        if (!ValidateJson(x, ap, root, why)) return Fail(why, k + ": " + why);
      }
    }
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>())
      return Fail(why, "too many properties");
  }
  if (v.is_array()) {
    size_t p = 0;
    if (s.contains("prefixItems")) {
      p = s["prefixItems"].size();
      for (size_t i = 0; i < std::min(p, v.size()); ++i)
        if (!ValidateJson(v[i], s["prefixItems"][i], root, why)) return false;
    }
    if (s.contains("items"))
      for (size_t i = p; i < v.size(); ++i)
        if (!ValidateJson(v[i], s["items"], root, why)) return Fail(why, "item: " + why);
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      return Fail(why, "too few items");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      return Fail(why, "too many items");
  }
  if (v.is_string()) {
    std::string str = v.get<std::string>();
    if (s.contains("minLength") && CodePoints(str) < s["minLength"].get<size_t>())
      return Fail(why, "string too short");
    if (s.contains("maxLength") && CodePoints(str) > s["maxLength"].get<size_t>())
      return Fail(why, "string too long: " + v.dump());
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>(),
                                                                    std::regex::ECMAScript)))
      return Fail(why, "pattern mismatch: " + v.dump());
    if (s.contains("format") && !FormatOk(s["format"].get<std::string>(), str))
      return Fail(why, "format " + s["format"].get<std::string>() + " mismatch: " + v.dump());
  }
  if (v.is_number()) {
    double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return Fail(why, "below minimum");
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return Fail(why, "above maximum");
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
        x <= s["exclusiveMinimum"].get<double>())
      return Fail(why, "not above exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
        x >= s["exclusiveMaximum"].get<double>())
      return Fail(why, "not below exclusiveMaximum");
  }
  return true;
}

}  // namespace m3::test
