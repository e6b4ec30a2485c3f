// Binding of call arguments (positional + keyword) to a Python-style parameter list, for
// filters, tests, methods and global functions.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "gateway/template/value.h"

namespace m3::tmpl {

// Returns one value per parameter: the positional argument, else the keyword argument, else an
// undefined value (the caller applies its default). Throws a TypeError-like RenderError for
// too many positional arguments or an unknown keyword.
std::vector<Value> BindArgs(const CallArgs& args, const std::string& function,
                            std::initializer_list<const char*> params);

// Integer argument with a default when missing/undefined; throws when not an integer.
int64_t IntArg(const Value& v, int64_t fallback, const char* what);
bool BoolArg(const Value& v, bool fallback);

}  // namespace m3::tmpl
