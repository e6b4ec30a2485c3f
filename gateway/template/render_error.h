// The engine's internal failures. Evaluation code throws these without a location; the renderer
// catches them at the top and turns them into m3::Error("<name>:<line>: ...") using the line of
// the node that was being evaluated.
#pragma once

#include <stdexcept>
#include <string>

namespace m3::tmpl {

// A runtime error in the template (TypeError, UndefinedError, unknown filter...).
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A TemplateLimits bound was exceeded (depth, size, work): reported as kTooLarge, since it is
// the request's size or the template's cost, not a mistake in either, that is refused.
class LimitError : public RenderError {
 public:
  using RenderError::RenderError;
};

// raise_exception(msg) called by the template itself: the request is refused by the template.
class RaisedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void Fail(const std::string& message) {
  throw RenderError(message);
}

[[noreturn]] inline void FailLimit(const std::string& message) {
  throw LimitError(message);
}

}  // namespace m3::tmpl
