// Python semantics of the expression operators: arithmetic with int/float promotion, floor
// division and modulo signs, str/list concatenation and repetition, comparisons and `in`.
#pragma once

#include <string>

#include "gateway/template/value.h"

namespace m3::tmpl {

Value BinaryOp(const std::string& op, const Value& a, const Value& b);  // + - * / // % ** ~
Value Negate(const Value& v);
Value Positive(const Value& v);
bool CompareOp(const std::string& op, const Value& a, const Value& b);  // == != < <= > >= in notin
bool Contains(const Value& container, const Value& item);

}  // namespace m3::tmpl
