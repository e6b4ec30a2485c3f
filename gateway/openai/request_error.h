// RequestError: a client-facing failure of an OpenAI API request, carrying what the response
// needs: the HTTP status, the OpenAI error "type" and "code", and the request field it is about
// ("param", e.g. "messages[1].content[0].image_url.url"). ErrorBody renders the OpenAI error
// object, so every endpoint answers bad input the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace m3::openai {

class RequestError : public Error {
 public:
  // `code`: the OpenAI "code" slug (e.g. "invalid_type", "model_not_found"); the status and
  // type follow from `kind`.
  RequestError(ErrorCode kind, std::string message, std::string param, std::string code);

  int http_status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& error_code() const { return code_; }
  std::string_view type() const;

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// {"error": {"message", "type", "param", "code"}}; invalid UTF-8 in message or param (a client's
// own bytes quoted back) becomes U+FFFD so the body always serializes.
nlohmann::json ErrorBody(int http_status, std::string_view message,
                         std::optional<std::string> param, std::string_view code);
nlohmann::json ErrorBody(const RequestError& error);

}  // namespace m3::openai
