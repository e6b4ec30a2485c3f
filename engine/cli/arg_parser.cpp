// ArgParser: --name value and --name=value forms; numbers parsed strictly.
#include "engine/cli/arg_parser.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "shared/error.h"

namespace m3::engine::cli {
namespace {

// Joins parts with append: GCC 12 reports a false -Wrestrict on "literal" + std::string chains.
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (auto p : parts) s.append(p);
  return s;
}

}  // namespace

void ArgParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    Require(a.rfind("--", 0) == 0, ErrorCode::kInvalidArgument,
            Cat({"unexpected argument '", a, "'"}));
    std::string name(a.begin() + 2, a.end()), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value.assign(name.begin() + static_cast<std::ptrdiff_t>(eq) + 1, name.end());
      name.resize(eq);
      inline_value = true;
    }
    Require(!values_.count(name), ErrorCode::kInvalidArgument,
            Cat({"option --", name, " given twice"}));
    if (flags_.count(name)) {
      Require(!inline_value, ErrorCode::kInvalidArgument,
              Cat({"flag --", name, " takes no value"}));
      values_.emplace(name, std::string(1, '1'));
    } else if (options_.count(name)) {
      if (!inline_value) {
        Require(i + 1 < args.size(), ErrorCode::kInvalidArgument,
                Cat({"option --", name, " needs a value"}));
        value = args[++i];
      }
      values_[name] = value;
    } else {
      throw Error(ErrorCode::kInvalidArgument, Cat({"unknown option --", name}));
    }
  }
}

bool ArgParser::Has(const std::string& name) const {
  return values_.count(name) != 0;
}

std::optional<std::string> ArgParser::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ArgParser::Required(const std::string& name) const {
  auto v = Get(name);
  Require(v.has_value(), ErrorCode::kInvalidArgument, Cat({"missing required option --", name}));
  return *v;
}

double ArgParser::Double(const std::string& name, double fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  Require(!v->empty() && end && *end == '\0' && std::isfinite(d), ErrorCode::kInvalidArgument,
          Cat({"--", name, " expects a finite number, got '", *v, "'"}));
  return d;
}

int64_t ArgParser::Int(const std::string& name, int64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v->c_str(), &end, 10);
  Require(!v->empty() && end && *end == '\0', ErrorCode::kInvalidArgument,
          Cat({"--", name, " expects an integer, got '", *v, "'"}));
  // strtoll saturates what does not fit: refused rather than read as the largest value.
  Require(errno != ERANGE, ErrorCode::kInvalidArgument,
          Cat({"--", name, " ", *v, " is out of the 64-bit range"}));
  return n;
}

int64_t ArgParser::IntIn(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  const int64_t n = Int(name, fallback);
  Require(n >= lo && n <= hi, ErrorCode::kInvalidArgument,
          Cat({"--", name, " must be in [", std::to_string(lo), ", ", std::to_string(hi), "], got ",
               std::to_string(n)}));
  return n;
}

std::string ArgParser::Choice(const std::string& name, const std::vector<std::string>& allowed,
                              const std::string& fallback) const {
  const std::string v = Get(name).value_or(fallback);
  std::string list;
  for (const std::string& a : allowed) {
    if (a == v) return v;
    list += list.empty() ? "'" + a + "'" : " or '" + a + "'";
  }
  throw Error(ErrorCode::kInvalidArgument, "--" + name + " must be " + list + ", not '" + v + "'");
}

}  // namespace m3::engine::cli
