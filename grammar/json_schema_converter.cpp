// ConvertJsonSchema: a recursive walk over the schema building IR expressions; every $ref
// target becomes a rule (so recursion through "#" or $defs is a rule cycle), primitive pieces
// are shared rules that the automaton builder inlines.
#include "grammar/json_schema_converter.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "grammar/regex_parser.h"

namespace m3::grammar {

namespace {

using Json = nlohmann::ordered_json;

ByteSet Range(int lo, int hi) {
  ByteSet s;
  for (int c = lo; c <= hi; ++c) s.set(static_cast<size_t>(c));
  return s;
}

// Digit strings of equal width from lo to hi (leading zeros allowed), as IR.
ExprId FixedWidthRange(GrammarIr& ir, const std::string& lo, const std::string& hi) {
  if (lo.empty()) return ir.Empty();
  if (lo.size() == 1) return ir.Bytes(Range(lo[0], hi[0]));
  std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0])
    return ir.Seq({ir.Literal(lo.substr(0, 1)), FixedWidthRange(ir, lo_rest, hi_rest)});
  bool lo_zero = lo_rest.find_first_not_of('0') == std::string::npos;
  bool hi_nine = hi_rest.find_first_not_of('9') == std::string::npos;
  auto any = [&](size_t n) {
    return ir.Repeat(ir.Bytes(Range('0', '9')), static_cast<int>(n), static_cast<int>(n));
  };
  std::vector<ExprId> alts;
  char first = lo[0], last = hi[0];
  if (!lo_zero) {
    alts.push_back(ir.Seq({ir.Literal(lo.substr(0, 1)),
                           FixedWidthRange(ir, lo_rest, std::string(lo_rest.size(), '9'))}));
    ++first;
  }
  if (!hi_nine) --last;
  if (first <= last) alts.push_back(ir.Seq({ir.Bytes(Range(first, last)), any(lo_rest.size())}));
  if (!hi_nine)
    alts.push_back(ir.Seq({ir.Literal(hi.substr(0, 1)),
                           FixedWidthRange(ir, std::string(hi_rest.size(), '0'), hi_rest)}));
  return ir.Choice(std::move(alts));
}

// Unbounded integers are written with at most this many digits.
constexpr size_t kMaxDigits = 19;

// Non-negative integers in [lo, hi] (bounded false: no upper bound), no leading zeros.
ExprId NonNegativeRange(GrammarIr& ir, unsigned long long lo, bool bounded, unsigned long long hi) {
  std::vector<ExprId> alts;
  std::string los = std::to_string(lo);
  size_t width = los.size();
  for (;; ++width) {
    unsigned long long width_min = width == 1 ? 0 : 1;
    for (size_t i = 1; i < width; ++i) width_min *= 10;
    unsigned long long width_max = 0;
    bool overflow = width >= 20;
    if (!overflow)
      for (size_t i = 0; i < width; ++i) width_max = width_max * 10 + 9;
    unsigned long long a = std::max(lo, width_min);
    if (bounded && a > hi) break;
    if (!bounded && (width > los.size() + 1 || overflow)) {
      // Every longer width up to 19 digits (a model that keeps writing digits must end).
      if (width <= kMaxDigits)
        alts.push_back(ir.Seq({ir.Bytes(Range('1', '9')),
                               ir.Repeat(ir.Bytes(Range('0', '9')), static_cast<int>(width - 1),
                                         static_cast<int>(kMaxDigits - 1))}));
      break;
    }
    unsigned long long b = overflow ? std::numeric_limits<unsigned long long>::max() : width_max;
    if (bounded) b = std::min(b, hi);
    std::string as = std::to_string(a), bs = std::to_string(b);
    if (as.size() == bs.size()) alts.push_back(FixedWidthRange(ir, as, bs));
    if (bounded && b == hi) break;
    if (overflow) break;
  }
  return ir.Choice(std::move(alts));
}

}  // namespace

ExprId IntegerRange(GrammarIr& ir, bool has_lo, long long lo, bool has_hi, long long hi) {
  std::vector<ExprId> alts;
  if (has_lo && has_hi && lo > hi) return ir.Choice({});
  // Negative part: -(k) for k in [max(1, -hi), -lo].
  if (!has_lo || lo < 0) {
    unsigned long long kmin =
        (has_hi && hi < 0) ? static_cast<unsigned long long>(-(hi + 1)) + 1 : 1;
    if (has_lo) {
      unsigned long long kmax = static_cast<unsigned long long>(-(lo + 1)) + 1;
      alts.push_back(ir.Seq({ir.Literal("-"), NonNegativeRange(ir, kmin, true, kmax)}));
    } else {
      alts.push_back(ir.Seq({ir.Literal("-"), NonNegativeRange(ir, kmin, false, 0)}));
    }
  }
  if (!has_hi || hi >= 0) {
    unsigned long long a = has_lo && lo > 0 ? static_cast<unsigned long long>(lo) : 0;
    alts.push_back(
        NonNegativeRange(ir, a, has_hi, has_hi ? static_cast<unsigned long long>(hi) : 0));
  }
  return ir.Choice(std::move(alts));
}

ExprId TextNotContaining(GrammarIr& ir, std::string_view s) {
  // KMP over bytes of s (ASCII markers in practice); other code points reset to state 0.
  size_t n = s.size();
  std::vector<size_t> fail(n + 1, 0);
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && s[i] != s[k]) k = fail[k];
    if (s[i] == s[k]) ++k;
    fail[i + 1] = k;
  }
  auto delta = [&](size_t q, char c) {
    while (q > 0 && s[q] != c) q = fail[q];
    return s[q] == c ? q + 1 : 0;
  };
  std::set<unsigned char> chars(s.begin(), s.end());
  std::vector<RuleId> rules(n);
  int serial = static_cast<int>(ir.rules().size());
  for (size_t q = 0; q < n; ++q)
    rules[q] = ir.AddRule("text_" + std::to_string(serial) + "_" + std::to_string(q));
  std::vector<CodepointRange> in_s;
  for (unsigned char c : chars) in_s.push_back({c, c});
  for (size_t q = 0; q < n; ++q) {
    std::vector<ExprId> alts = {ir.Empty()};
    for (unsigned char c : chars) {
      size_t t = delta(q, static_cast<char>(c));
      if (t >= n) continue;
      alts.push_back(ir.Seq({ir.Literal(std::string(1, static_cast<char>(c))), ir.Ref(rules[t])}));
    }
    alts.push_back(ir.Seq({ir.Codepoints(in_s, true), ir.Ref(rules[0])}));
    ir.SetBody(rules[q], ir.Choice(std::move(alts)));
  }
  return ir.Ref(rules[0]);
}

namespace {

class Converter {
 public:
  Converter(GrammarIr& ir, const Json& root, const JsonSchemaOptions& o, const SchemaEncoding& e)
      : ir_(ir), root_(root), opt_(o), enc_(e) {}

  ExprId Value(const Json& schema, const std::string& path, int depth) {
    Require(depth <= ir_.limits().max_depth, ErrorCode::kTooLarge,
            "schema nested deeper than " + std::to_string(ir_.limits().max_depth) + " levels at " +
                path + " (CompileLimits::max_depth)");
    if (schema.is_boolean()) return schema.get<bool>() ? AnyValue() : ir_.Choice({});
    Require(schema.is_object(), ErrorCode::kInvalidArgument,
            "schema at " + path + " is not an object or boolean");
    if (schema.contains("$ref")) {
      Require(schema["$ref"].is_string(), ErrorCode::kInvalidArgument,
              "$ref at " + path + " is not a string");
      return Ref(schema["$ref"].get<std::string>(), path);
    }
    if (schema.contains("const")) return Literal(schema["const"], path);
    if (schema.contains("enum")) {
      Require(schema["enum"].is_array() && !schema["enum"].empty(), ErrorCode::kInvalidArgument,
              "enum at " + path + " must be a non-empty array");
      std::vector<ExprId> alts;
      for (const auto& v : schema["enum"]) alts.push_back(Literal(v, path));
      return ir_.Choice(std::move(alts));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      Require(schema[key].is_array() && !schema[key].empty(), ErrorCode::kInvalidArgument,
              std::string(key) + " at " + path + " must be a non-empty array");
      std::vector<ExprId> alts;
      size_t i = 0;
      for (const auto& sub : schema[key]) {
        // Sibling keywords apply to every branch (a common shape: type + anyOf).
        Json merged = sub;
        if (sub.is_object())
          for (auto& [k, v] : schema.items())
            if (k != key && !merged.contains(k)) merged[k] = v;
        alts.push_back(Value(merged, path + "/" + key + "/" + std::to_string(i++), depth + 1));
      }
      return ir_.Choice(std::move(alts));
    }
    if (schema.contains("allOf")) {
      Require(schema["allOf"].is_array(), ErrorCode::kInvalidArgument,
              "allOf at " + path + " must be an array");
      Json merged = schema;
      merged.erase("allOf");
      for (const auto& sub : schema["allOf"]) {
        Json s = sub;
        if (s.is_object() && s.contains("$ref")) s = Resolve(s["$ref"].get<std::string>(), path);
        Require(s.is_object(), ErrorCode::kInvalidArgument,
                "allOf at " + path + " holds a non-object schema");
        for (auto& [k, v] : s.items()) {
          if (k == "properties" && merged.contains("properties")) {
            for (auto& [pk, pv] : v.items()) merged["properties"][pk] = pv;
          } else if (k == "required" && merged.contains("required")) {
            for (auto& r : v) merged["required"].push_back(r);
          } else {
            merged[k] = v;
          }
        }
      }
      return Value(merged, path, depth + 1);
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const auto& t = schema["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else {
        Require(t.is_array() && !t.empty(), ErrorCode::kInvalidArgument,
                "type at " + path + " must be a string or a non-empty array");
        for (const auto& x : t) {
          Require(x.is_string(), ErrorCode::kInvalidArgument,
                  "type at " + path + " holds a non-string");
          types.push_back(x.get<std::string>());
        }
      }
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems") ||
               schema.contains("minItems") || schema.contains("maxItems")) {
      types.push_back("array");
    } else if (schema.contains("pattern") || schema.contains("format") ||
               schema.contains("minLength") || schema.contains("maxLength")) {
      types.push_back("string");
    } else if (schema.contains("minimum") || schema.contains("maximum") ||
               schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return AnyValue();
    }
    if (schema.value("nullable", false)) types.push_back("null");
    std::vector<ExprId> alts;
    for (const std::string& t : types) {
      if (t == "object") {
        alts.push_back(Object(schema, path, depth));
      } else if (t == "array") {
        alts.push_back(Array(schema, path, depth));
      } else if (t == "string") {
        alts.push_back(String(schema, path));
      } else if (t == "integer") {
        alts.push_back(Number(schema, path, true));
      } else if (t == "number") {
        alts.push_back(Number(schema, path, false));
      } else if (t == "boolean") {
        alts.push_back(ir_.Choice({ir_.Literal("true"), ir_.Literal("false")}));
      } else if (t == "null") {
        alts.push_back(enc_.m3_xml ? ir_.Empty() : ir_.Literal("null"));
      } else {
        throw Error(ErrorCode::kInvalidArgument, "unknown type '" + t + "' at " + path);
      }
    }
    return ir_.Choice(std::move(alts));
  }

  ExprId AnyValue() {
    if (enc_.m3_xml) return RawText();
    if (any_value_ < 0) {
      any_value_ = ir_.AddRule("json_value");
      RuleId obj = ir_.AddRule("json_object");
      RuleId arr = ir_.AddRule("json_array");
      // Scalars inside containers are inlined (only nested containers are calls), so a string's
      // end and the "," / "]" / "}" after it are decided inside the container's own automaton.
      ExprId value = ir_.Choice({ir_.Ref(obj), ir_.Ref(arr), JsonString(), JsonNumber(),
                                 ir_.Literal("true"), ir_.Literal("false"), ir_.Literal("null")});
      ExprId member = ir_.Seq({JsonString(), Ws(), ir_.Literal(":"), Ws(), value});
      ir_.SetBody(
          obj,
          ir_.Seq({ir_.Literal("{"), Ws(),
                   ir_.Optional(ir_.Seq(
                       {member, ir_.Star(ir_.Seq({Ws(), ir_.Literal(","), Ws(), member})), Ws()})),
                   ir_.Literal("}")}));
      ir_.SetBody(
          arr,
          ir_.Seq({ir_.Literal("["), Ws(),
                   ir_.Optional(ir_.Seq(
                       {value, ir_.Star(ir_.Seq({Ws(), ir_.Literal(","), Ws(), value})), Ws()})),
                   ir_.Literal("]")}));
      ir_.SetBody(any_value_, value);
      any_object_ = obj;
    }
    return ir_.Ref(any_value_);
  }

  ExprId AnyObject() {
    AnyValue();
    return ir_.Ref(any_object_);
  }

  ExprId Ws() {
    if (!opt_.any_whitespace) return ir_.Empty();
    ByteSet s;
    for (char c : {' ', '\t', '\n', '\r'}) s.set(static_cast<unsigned char>(c));
    return ir_.Repeat(ir_.Bytes(s), 0, opt_.max_whitespace);
  }

 private:
  const Json& Resolve(const std::string& ref, const std::string& path) {
    Require(!ref.empty() && ref[0] == '#', ErrorCode::kInvalidArgument,
            "$ref '" + ref + "' at " + path + ": only local references (#...) are supported");
    const Json* node = &root_;
    std::string p = ref.substr(1);
    if (!p.empty()) {
      Require(p[0] == '/', ErrorCode::kInvalidArgument,
              "$ref '" + ref + "' at " + path + " is malformed");
      size_t i = 1;
      while (i <= p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        std::string token = p.substr(i, j - i);
        std::string key;
        for (size_t k = 0; k < token.size(); ++k) {
          if (token[k] == '~' && k + 1 < token.size()) {
            key.push_back(token[k + 1] == '1' ? '/' : '~');
            ++k;
          } else {
            key.push_back(token[k]);
          }
        }
        if (node->is_object() && node->contains(key)) {
          node = &(*node)[key];
        } else if (node->is_array() && !key.empty() &&
                   key.find_first_not_of("0123456789") == std::string::npos &&
                   std::stoul(key) < node->size()) {
          node = &(*node)[std::stoul(key)];
        } else {
          throw Error(ErrorCode::kInvalidArgument,
                      "$ref '" + ref + "' at " + path + " points to nothing");
        }
        i = j + 1;
      }
    }
    return *node;
  }

  ExprId Ref(const std::string& ref, const std::string& path) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return ir_.Ref(it->second);
    const Json& target = Resolve(ref, path);
    RuleId r = ir_.AddRule("ref_" + std::to_string(refs_.size()));
    refs_.emplace(ref, r);
    ir_.SetBody(r, Value(target, ref, 1));
    return ir_.Ref(r);
  }

  ExprId Literal(const Json& v, const std::string& path) {
    if (enc_.m3_xml) {
      if (v.is_string()) return ir_.Literal(v.get<std::string>());
      if (v.is_null()) return ir_.Empty();
      if (v.is_object() || v.is_array()) {
        // to_xml of a constant object / array, rendered as the template would.
        std::string out;
        XmlConst(v, out);
        return ir_.Literal(out);
      }
      return ir_.Literal(v.dump());
    }
    std::string text = opt_.any_whitespace ? v.dump() : v.dump();
    return ir_.Literal(text);
  }

  void XmlConst(const Json& v, std::string& out) {
    if (v.is_object()) {
      for (auto& [k, x] : v.items()) {
        if (x.is_null()) continue;
        out += enc_.xml_tag_prefix + "<" + k + ">";
        XmlConst(x, out);
        out += enc_.xml_tag_prefix + "</" + k + ">";
      }
    } else if (v.is_array()) {
      for (const auto& x : v) {
        out += enc_.xml_tag_prefix + "<item>";
        XmlConst(x, out);
        out += enc_.xml_tag_prefix + "</item>";
      }
    } else if (v.is_string()) {
      out += v.get<std::string>();
    } else if (!v.is_null()) {
      out += v.dump();
    }
  }

  ExprId Key(const std::string& name) {
    if (enc_.m2_xml) return ir_.Literal("<parameter name=\"" + name + "\">");
    if (enc_.m3_xml) return ir_.Literal(enc_.xml_tag_prefix + "<" + name + ">");
    return ir_.Literal(Json(name).dump());
  }

  ExprId Member(const std::string& name, ExprId value) {
    if (enc_.m2_xml) return ir_.Seq({Key(name), value, ir_.Literal("</parameter>\n")});
    if (enc_.m3_xml)
      return ir_.Seq({Key(name), value, ir_.Literal(enc_.xml_tag_prefix + "</" + name + ">")});
    return ir_.Seq({Key(name), Ws(), ir_.Literal(":"), Ws(), value});
  }

  ExprId Comma() {
    if (enc_.m3_xml || enc_.m2_xml) return ir_.Empty();
    return ir_.Seq({Ws(), ir_.Literal(","), Ws()});
  }

  ExprId Object(const Json& schema, const std::string& path, int depth) {
    std::vector<std::pair<std::string, ExprId>> props;
    std::vector<bool> required;
    std::set<std::string> req;
    if (schema.contains("required")) {
      Require(schema["required"].is_array(), ErrorCode::kInvalidArgument,
              "required at " + path + " must be an array");
      for (const auto& r : schema["required"]) {
        Require(r.is_string(), ErrorCode::kInvalidArgument,
                "required at " + path + " holds a non-string");
        req.insert(r.get<std::string>());
      }
    }
    if (schema.contains("properties")) {
      Require(schema["properties"].is_object(), ErrorCode::kInvalidArgument,
              "properties at " + path + " must be an object");
      for (auto& [name, sub] : schema["properties"].items()) {
        if (enc_.m2_xml) {
          // M2 parameters: a string value raw (up to "</parameter>"), any other value JSON.
          SchemaEncoding saved = enc_;
          bool is_string = sub.is_object() && sub.contains("type") && sub["type"] == "string";
          enc_ = SchemaEncoding{};
          if (is_string) {
            enc_.m3_xml = true;
            enc_.raw_terminator = "</parameter>";
          }
          ExprId v = Value(sub, path + "/properties/" + name, depth + 1);
          enc_ = saved;
          props.push_back({name, v});
        } else {
          props.push_back({name, Value(sub, path + "/properties/" + name, depth + 1)});
        }
        required.push_back(req.count(name) > 0);
      }
    }
    for (const std::string& r : req) {
      bool listed = false;
      for (auto& p : props) listed |= p.first == r;
      // A required key with no schema: any value.
      if (!listed) {
        props.push_back({r, AnyValue()});
        required.push_back(true);
      }
    }
    // Extra keys: what additionalProperties allows (strict mode: none when properties exist).
    ExprId extra = -1;
    bool has_ap = schema.contains("additionalProperties");
    const Json ap = has_ap ? schema["additionalProperties"] : Json(true);
    bool ap_false = ap.is_boolean() && !ap.get<bool>();
    bool allow_extra = !ap_false && (!opt_.strict || props.empty());
    if (schema.contains("patternProperties") || schema.contains("unevaluatedProperties"))
      allow_extra = allow_extra && !props.empty() ? false : allow_extra;
    if (allow_extra && !enc_.m3_xml && !enc_.m2_xml) {
      ExprId value =
          ap.is_object() ? Value(ap, path + "/additionalProperties", depth + 1) : AnyValue();
      extra = ir_.Seq({JsonString(), Ws(), ir_.Literal(":"), Ws(), value});
    }
    std::vector<ExprId> members;
    for (size_t i = 0; i < props.size(); ++i)
      members.push_back(Member(props[i].first, props[i].second));
    size_t n = members.size();
    // tail[i]: the members from i on, after at least one was written.
    std::vector<ExprId> tail(n + 1);
    tail[n] = extra >= 0 ? ir_.Star(ir_.Seq({Comma(), extra})) : ir_.Empty();
    for (size_t i = n; i-- > 0;) {
      ExprId m = ir_.Seq({Comma(), members[i]});
      tail[i] = ir_.Seq({required[i] ? m : ir_.Optional(m), tail[i + 1]});
    }
    // The first member written: any member up to and including the first required one.
    std::vector<ExprId> firsts;
    size_t first_required = n;
    for (size_t i = 0; i < n; ++i)
      if (required[i]) {
        first_required = i;
        break;
      }
    for (size_t i = 0; i < n && i <= first_required; ++i)
      firsts.push_back(ir_.Seq({members[i], tail[i + 1]}));
    if (first_required == n && extra >= 0) firsts.push_back(ir_.Seq({extra, tail[n]}));
    ExprId body = firsts.empty() ? ir_.Empty() : ir_.Choice(std::move(firsts));
    if (first_required == n && !firsts.empty()) body = ir_.Optional(body);
    if (enc_.m3_xml || enc_.m2_xml) return body;
    return ir_.Seq({ir_.Literal("{"), Ws(), body, Ws(), ir_.Literal("}")});
  }

  int IntKeyword(const Json& schema, const char* key, int fallback, const std::string& path) {
    if (!schema.contains(key)) return fallback;
    const auto& v = schema[key];
    Require(
        v.is_number_integer() || (v.is_number() && std::floor(v.get<double>()) == v.get<double>()),
        ErrorCode::kInvalidArgument, std::string(key) + " at " + path + " must be an integer");
    double d = v.get<double>();
    Require(d >= 0, ErrorCode::kInvalidArgument, std::string(key) + " at " + path + " is negative");
    return d > 1e9 ? 1000000000 : static_cast<int>(d);
  }

  ExprId Array(const Json& schema, const std::string& path, int depth) {
    std::vector<ExprId> prefix;
    if (schema.contains("prefixItems")) {
      Require(schema["prefixItems"].is_array(), ErrorCode::kInvalidArgument,
              "prefixItems at " + path + " must be an array");
      size_t i = 0;
      for (const auto& s : schema["prefixItems"])
        prefix.push_back(Value(s, path + "/prefixItems/" + std::to_string(i++), depth + 1));
    }
    ExprId item = -1;  // -1: no items past the prefix
    if (schema.contains("items")) {
      const auto& it = schema["items"];
      if (!(it.is_boolean() && !it.get<bool>())) item = Value(it, path + "/items", depth + 1);
    } else {
      item = prefix.empty() || !opt_.strict ? AnyValue() : -1;
    }
    int min = IntKeyword(schema, "minItems", 0, path);
    int max = IntKeyword(schema, "maxItems", -1, path);
    Require(max < 0 || max >= min, ErrorCode::kInvalidArgument,
            "maxItems < minItems at " + path + ": no array can match");
    if (max > ir_.limits().max_repeat) max = -1;
    Require(min <= ir_.limits().max_repeat, ErrorCode::kTooLarge,
            "minItems at " + path + " over " + std::to_string(ir_.limits().max_repeat) +
                " (CompileLimits::max_repeat)");
    auto wrap = [&](ExprId v) {
      return enc_.m3_xml ? ir_.Seq({ir_.Literal(enc_.xml_tag_prefix + "<item>"), v,
                                    ir_.Literal(enc_.xml_tag_prefix + "</item>")})
                         : v;
    };
    // Element k (0-based) is prefix[k] while k < prefix.size(), then item.
    int p = static_cast<int>(prefix.size());
    int total_max = max;
    if (item < 0) total_max = total_max < 0 ? p : std::min(total_max, p);
    Require(total_max < 0 || total_max >= min, ErrorCode::kInvalidArgument,
            "array at " + path + " cannot reach minItems with its items");
    // Build from the end: rest(k) = the elements from k on, given k were written.
    std::function<ExprId(int)> rest = [&](int k) -> ExprId {
      if (total_max >= 0 && k >= total_max) return ir_.Empty();
      if (k >= p) {
        // Homogeneous items from k: count in [max(0, min-k), total_max-k].
        int lo = std::max(0, min - k);
        int hi = total_max < 0 ? -1 : total_max - k;
        ExprId one = ir_.Seq({Comma(), wrap(item)});
        if (k == 0) {
          // No comma before the first element.
          ExprId first = wrap(item);
          ExprId more = ir_.Repeat(one, std::max(0, lo - 1), hi < 0 ? -1 : hi - 1);
          ExprId some = ir_.Seq({first, more});
          return lo == 0 ? ir_.Optional(some) : some;
        }
        return ir_.Repeat(one, lo, hi);
      }
      ExprId elem =
          k == 0 ? wrap(prefix[0]) : ir_.Seq({Comma(), wrap(prefix[static_cast<size_t>(k)])});
      ExprId seq = ir_.Seq({elem, rest(k + 1)});
      return k >= min ? ir_.Optional(seq) : seq;
    };
    ExprId body = rest(0);
    if (enc_.m3_xml) return body;
    return ir_.Seq({ir_.Literal("["), Ws(), body, Ws(), ir_.Literal("]")});
  }

  ExprId JsonChar() {
    if (json_char_ < 0) {
      json_char_ = ir_.AddRule("json_char");
      ByteSet esc;
      for (char c : std::string("\"\\/bfnrt")) esc.set(static_cast<unsigned char>(c));
      ByteSet hex = Range('0', '9') | Range('a', 'f') | Range('A', 'F');
      ir_.SetBody(
          json_char_,
          ir_.Choice({ir_.Codepoints({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true),
                      ir_.Seq({ir_.Literal("\\"),
                               ir_.Choice({ir_.Bytes(esc),
                                           ir_.Seq({ir_.Literal("u"),
                                                    ir_.Repeat(ir_.Bytes(hex), 4, 4)})})})}));
    }
    return ir_.Ref(json_char_);
  }

  ExprId JsonString() {
    if (json_string_ < 0) {
      json_string_ = ir_.AddRule("json_string");
      ir_.SetBody(json_string_,
                  ir_.Seq({ir_.Literal("\""), ir_.Star(JsonChar()), ir_.Literal("\"")}));
    }
    return ir_.Ref(json_string_);
  }

  ExprId JsonNumber() {
    if (json_number_ < 0) {
      json_number_ = ir_.AddRule("json_number");
      ir_.SetBody(json_number_, ir_.Seq({IntegerRange(ir_, false, 0, false, 0), Fraction(),
                                         ir_.Optional(Exponent())}));
    }
    return ir_.Ref(json_number_);
  }

  // Fraction digits bounded (a model that keeps emitting digits would never end the value).
  ExprId Fraction() {
    return ir_.Optional(ir_.Seq({ir_.Literal("."), ir_.Repeat(ir_.Bytes(Range('0', '9')), 1, 16)}));
  }
  ExprId Exponent() {
    ByteSet e, sign;
    e.set('e');
    e.set('E');
    sign.set('+');
    sign.set('-');
    return ir_.Seq({ir_.Bytes(e), ir_.Optional(ir_.Bytes(sign)),
                    ir_.Repeat(ir_.Bytes(Range('0', '9')), 1, 2)});
  }

  ExprId RawText() {
    if (!enc_.raw_terminator.empty()) return TextNotContaining(ir_, enc_.raw_terminator);
    return TextNotContaining(ir_, enc_.xml_tag_prefix.empty() ? "<" : enc_.xml_tag_prefix);
  }

  static const char* FormatRegex(const std::string& f) {
    static const std::map<std::string, const char*> formats = {
        {"date", "\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])"},
        {"time",
         "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)"},
        {"date-time",
         "\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])T([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{"
         "1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)"},
        {"duration",
         "P(\\d{1,6}Y)?(\\d{1,6}M)?(\\d{1,6}W)?(\\d{1,6}D)?(T(\\d{1,6}H)?(\\d{1,6}M)?(\\d{1,6}S)?)"
         "?"},
        {"email",
         "[a-zA-Z0-9][a-zA-Z0-9._%+-]{0,63}@[a-zA-Z0-9-]{1,63}(\\.[a-zA-Z0-9-]{1,63}){0,3}\\.[a-zA-"
         "Z]{2,12}"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"ipv4",
         "((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"},
        {"ipv6", "([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}"},
        {"hostname",
         "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])"
         "?){0,4}"},
        {"uri", "[a-zA-Z][a-zA-Z0-9+.-]{0,15}:[!#-\\[\\]-~]{1,200}"},
    };
    auto it = formats.find(f);
    return it == formats.end() ? nullptr : it->second;
  }

  ExprId String(const Json& schema, const std::string& path) {
    bool xml = enc_.m3_xml;
    auto quoted = [&](ExprId content) {
      return xml ? content : ir_.Seq({ir_.Literal("\""), content, ir_.Literal("\"")});
    };
    if (schema.contains("pattern")) {
      Require(schema["pattern"].is_string(), ErrorCode::kInvalidArgument,
              "pattern at " + path + " must be a string");
      std::string pattern = schema["pattern"].get<std::string>();
      try {
        return quoted(ParseRegex(ir_, pattern, RegexOptions{!xml}));
      } catch (const Error& e) {
        throw Error(e.code(), "pattern at " + path + ": " + e.what());
      }
    }
    if (schema.contains("format") && schema["format"].is_string()) {
      if (const char* re = FormatRegex(schema["format"].get<std::string>()))
        return quoted(ParseRegex(ir_, re, RegexOptions{!xml}));
    }
    int min = IntKeyword(schema, "minLength", 0, path);
    int max = IntKeyword(schema, "maxLength", -1, path);
    Require(max < 0 || max >= min, ErrorCode::kInvalidArgument,
            "maxLength < minLength at " + path + ": no string can match");
    Require(min <= ir_.limits().max_repeat, ErrorCode::kTooLarge,
            "minLength at " + path + " over " + std::to_string(ir_.limits().max_repeat) +
                " (CompileLimits::max_repeat)");
    if (max > ir_.limits().max_repeat) max = -1;
    if (xml) {
      if (min == 0 && max < 0) return RawText();
      // Bounded raw text: characters other than '<' (the tag prefix's usual first byte).
      return ir_.Repeat(ir_.Codepoints({{'<', '<'}}, true), min, max);
    }
    if (min == 0 && max < 0) return JsonString();
    return quoted(ir_.Repeat(JsonChar(), min, max));
  }

  bool Bound(const Json& schema, const char* key, double& out, const std::string& path) {
    if (!schema.contains(key)) return false;
    const auto& v = schema[key];
    if (v.is_boolean()) return false;  // draft-4 exclusive flags are read with their bound
    Require(v.is_number(), ErrorCode::kInvalidArgument,
            std::string(key) + " at " + path + " must be a number");
    out = v.get<double>();
    return true;
  }

  ExprId Number(const Json& schema, const std::string& path, bool integer) {
    double lo = 0, hi = 0, x = 0;
    bool has_lo = Bound(schema, "minimum", lo, path);
    bool has_hi = Bound(schema, "maximum", hi, path);
    bool ex_lo = false, ex_hi = false;
    if (Bound(schema, "exclusiveMinimum", x, path) && (!has_lo || x >= lo)) {
      lo = x, has_lo = true, ex_lo = true;
    } else if (schema.value("exclusiveMinimum", Json(false)).is_boolean() &&
               schema.value("exclusiveMinimum", false)) {
      ex_lo = has_lo;
    }
    if (Bound(schema, "exclusiveMaximum", x, path) && (!has_hi || x <= hi)) {
      hi = x, has_hi = true, ex_hi = true;
    } else if (schema.value("exclusiveMaximum", Json(false)).is_boolean() &&
               schema.value("exclusiveMaximum", false)) {
      ex_hi = has_hi;
    }
    const double kBig = 9.0e18;
    if (has_lo && std::fabs(lo) > kBig) has_lo = lo < 0 ? false : has_lo;
    if (has_hi && std::fabs(hi) > kBig) has_hi = hi > 0 ? false : has_hi;
    Require(!(has_lo && std::fabs(lo) > kBig) && !(has_hi && std::fabs(hi) > kBig),
            ErrorCode::kInvalidArgument, "numeric bound at " + path + " out of range");
    // Integer parts allowed: [ilo, ihi].
    long long ilo = 0, ihi = 0;
    if (has_lo)
      ilo = ex_lo ? static_cast<long long>(std::floor(lo)) + 1
                  : static_cast<long long>(std::ceil(lo));
    if (has_hi)
      ihi = ex_hi ? static_cast<long long>(std::ceil(hi)) - 1
                  : static_cast<long long>(std::floor(hi));
    Require(!(has_lo && has_hi && ilo > ihi && integer), ErrorCode::kInvalidArgument,
            "no integer in the range at " + path);
    if (integer) return IntegerRange(ir_, has_lo, ilo, has_hi, ihi);
    if (!has_lo && !has_hi) return JsonNumber();
    // Bounded numbers: an integer part in range, and a fraction only where every value with
    // that integer part stays in range (n >= 0: [n, n+1) needs n + 1 <= hi; n < 0: (n-1, n]
    // needs n - 1 >= lo). No exponent.
    std::vector<ExprId> alts;
    if (!(has_lo && has_hi && ilo > ihi))
      alts.push_back(IntegerRange(ir_, has_lo, ilo, has_hi, ihi));
    // Non-negative with fraction: n in [max(0, ilo'), fhi] where n + 1 <= hi.
    {
      long long a = has_lo ? std::max<long long>(0, static_cast<long long>(std::ceil(lo))) : 0;
      if (has_lo && ex_lo && static_cast<double>(a) <= lo)
        a = static_cast<long long>(std::floor(lo)) + 1;
      bool bounded = has_hi;
      long long b = has_hi ? static_cast<long long>(std::floor(hi)) - 1 : 0;
      if (!bounded || a <= b)
        alts.push_back(ir_.Seq({IntegerRange(ir_, true, a, bounded, b), ir_.Literal("."),
                                ir_.Repeat(ir_.Bytes(Range('0', '9')), 1, 16)}));
    }
    // Negative with fraction: n = -k, k >= 1, with -k <= hi and -k - 1 >= lo.
    if (!has_lo || lo < 0) {
      long long kmin = has_hi && hi < 0 ? static_cast<long long>(std::ceil(-hi)) : 1;
      if (has_hi && ex_hi && hi < 0 && static_cast<double>(-kmin) >= hi) ++kmin;
      kmin = std::max<long long>(kmin, 1);
      bool bounded = has_lo;
      long long kmax = has_lo ? static_cast<long long>(std::floor(-lo)) - 1 : 0;
      if (!bounded || kmin <= kmax)
        alts.push_back(ir_.Seq({ir_.Literal("-"), IntegerRange(ir_, true, kmin, bounded, kmax),
                                ir_.Literal("."), ir_.Repeat(ir_.Bytes(Range('0', '9')), 1, 16)}));
    }
    Require(!alts.empty(), ErrorCode::kInvalidArgument, "no number in the range at " + path);
    return ir_.Choice(std::move(alts));
  }

  GrammarIr& ir_;
  const Json& root_;
  JsonSchemaOptions opt_;
  SchemaEncoding enc_;
  std::map<std::string, RuleId> refs_;
  RuleId any_value_ = -1, any_object_ = -1, json_char_ = -1, json_string_ = -1, json_number_ = -1;
};

}  // namespace

ExprId ConvertJsonSchema(GrammarIr& ir, const nlohmann::ordered_json& schema,
                         const JsonSchemaOptions& options, const SchemaEncoding& encoding) {
  Converter c(ir, schema, options, encoding);
  return c.Value(schema, "#", 0);
}

ExprId AnyJsonObject(GrammarIr& ir, const JsonSchemaOptions& options) {
  nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  Converter c(ir, empty, options, {});
  return c.AnyObject();
}

}  // namespace m3::grammar
