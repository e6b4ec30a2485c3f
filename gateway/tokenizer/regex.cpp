// PCRE2 wrapper: compiles with UTF and Unicode properties (\p{L}, \s match the Unicode classes
// the Rust/Oniguruma regexes of `tokenizers` use) and JIT-compiles for speed.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "gateway/tokenizer/regex.h"

#include <pcre2.h>

#include "gateway/unicode/utf8.h"
#include "shared/error.h"

namespace m3::tok {

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
};

Regex::Regex(const std::string& pattern) : compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(ErrorCode::kInvalidArgument,
                "tokenizer regex '" + pattern + "' does not compile at offset " +
                    std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (compiled_ && compiled_->code) pcre2_code_free(compiled_->code);
}

namespace {

// Per-thread matching scratch shared by every pattern: the ovector only needs the whole-match
// pair, and a JIT stack larger than the 32 KiB default keeps long whitespace runs on the JIT.
struct Scratch {
  Scratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    Require(data && context && stack, ErrorCode::kResourceExhausted,
            "out of memory for regex scratch");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  pcre2_match_data* data;
  pcre2_match_context* context;
  pcre2_jit_stack* stack;
};

}  // namespace

void Regex::ForEachMatch(std::string_view text, FunctionRef<void(size_t, size_t)> on_match) const {
  thread_local Scratch scratch;
  pcre2_match_data* md = scratch.data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), pos, 0, md,
                                              scratch.context)
                            : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(compiled_->code, subject, text.size(), pos,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    Require(rc >= 0, ErrorCode::kInternal,
            "regex match failed with PCRE2 code " + std::to_string(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    on_match(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= text.size()) break;
      pos = end + unicode::Utf8Length(static_cast<unsigned char>(text[end]));
    }
  }
}

}  // namespace m3::tok
