// Python's json.dumps over template values, as transformers' tojson filter calls it:
// ensure_ascii, indent (int or string), separators, sort_keys; insertion order otherwise.
#pragma once

#include <optional>
#include <string>

#include "gateway/template/value.h"

namespace m3::tmpl {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // absent = single line
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

std::string JsonDump(const Value& v, const JsonDumpOptions& options);

}  // namespace m3::tmpl
