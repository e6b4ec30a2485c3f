// The bounds every template parse and render runs under, so that a hostile template or request
// ends in a RenderError naming the bound instead of a stack overflow, a hang or bad_alloc. The
// defaults are far above what real chat templates need (the largest use a few hundred loop
// iterations and nest about ten deep) and low enough that one render stays within a few
// hundred megabytes and about a second of CPU.
#pragma once

#include <cstdint>

namespace m3::tmpl {

struct TemplateLimits {
  // Template source size; the lexer keeps a token per few bytes, so this bounds parse memory.
  int64_t max_source_bytes = int64_t{1} << 20;
  // Nesting of blocks and expressions in the source, of list/dict values (from the request
  // context or built by the template) and of tojson output.
  int max_nesting = 256;
  // Evaluation call depth (nested statements, expressions and macro calls together).
  int max_eval_depth = 1024;
  // Recursion of macros calling macros.
  int max_macro_depth = 200;
  // Bytes of any rendered buffer (the output, a macro's output, a {% set %} block).
  int64_t max_output_bytes = int64_t{64} << 20;
  // Bytes of any one string value.
  int64_t max_string_bytes = int64_t{64} << 20;
  // Items of any one list or dict value.
  int64_t max_list_items = int64_t{1} << 20;
  // for-loop iterations over the whole render.
  int64_t max_loop_iterations = int64_t{1} << 20;
  // Total work over the whole render, in steps: one per expression node, statement, loop
  // iteration and call, one per item a filter or comparison walks or a list holds, one per 64
  // bytes a string holds. The real chat templates use well under 1% of it.
  int64_t max_steps = int64_t{32} << 20;
};

}  // namespace m3::tmpl
