// The jinja2 test table (`x is defined`, `x is divisibleby 3`, ...).
#pragma once

#include <string>

#include "gateway/template/value.h"

namespace m3::tmpl {

using TestFn = bool (*)(const Value& input, CallArgs& args, Evaluator& ev);

TestFn FindTest(const std::string& name);  // nullptr when unknown

}  // namespace m3::tmpl
