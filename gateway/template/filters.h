// The filter table: jinja2's builtin filters used by chat templates, plus transformers'
// tojson override (json.dumps with ensure_ascii=False, indent, separators, sort_keys).
#pragma once

#include <string>

#include "gateway/template/value.h"

namespace m3::tmpl {

using FilterFn = Value (*)(const Value& input, CallArgs& args, Evaluator& ev);

FilterFn FindFilter(const std::string& name);  // nullptr when unknown

}  // namespace m3::tmpl
