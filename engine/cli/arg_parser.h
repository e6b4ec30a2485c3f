// A tiny command-line parser for m3-engine (the engine core must not depend on CLI11): a
// subcommand, then --name value / --flag options, each declared before parsing so an unknown
// or repeated option, or a missing value, is an error.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace m3::engine::cli {

class ArgParser {
 public:
  void AddOption(const std::string& name) { options_.insert(name); }  // takes a value
  void AddFlag(const std::string& name) { flags_.insert(name); }
  // Parses args (without the program name and subcommand); throws kInvalidArgument.
  void Parse(const std::vector<std::string>& args);

  bool Has(const std::string& name) const;
  std::string Required(const std::string& name) const;
  std::optional<std::string> Get(const std::string& name) const;
  double Double(const std::string& name, double fallback) const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  // Int, refused (naming the range) outside [lo, hi]: sizes that later multiply stay far from
  // overflow.
  int64_t IntIn(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  // The value of `name`, one of `allowed` (fallback when absent); throws kInvalidArgument
  // naming the choices otherwise.
  std::string Choice(const std::string& name, const std::vector<std::string>& allowed,
                     const std::string& fallback) const;

 private:
  std::set<std::string> options_, flags_;
  std::map<std::string, std::string> values_;
};

}  // namespace m3::engine::cli
