// Global functions every template sees: range, namespace, dict, cycler, joiner, and the
// transformers helpers raise_exception(message) and strftime_now(format).
#pragma once

#include "gateway/template/value.h"

namespace m3::tmpl {

void AddBuiltins(DictData& globals);

}  // namespace m3::tmpl
