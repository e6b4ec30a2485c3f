// StructuredOutputCompiler: the engine's side of structured outputs. It holds the model's
// vocabulary as the grammar engine sees it (the token byte strings of <model>/tokenizer.json,
// the eos ids as stop tokens, the logits' width) and compiles a request's StructuredOutput
// (proto/engine.proto) into a CompiledGrammar, cached by content in the grammar compiler.
// Two vocabularies: the plain one, where no special token is ever produced by its text (a JSON
// string cannot end up holding "<mm:think>"), and the tool-call one, where the chat format's
// markers (M3 "]<]minimax[>[", M2 "<minimax:tool_call>", the think tags) are matchable so a
// structural grammar can write a call and the model can think before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine.pb.h"
#include "grammar/grammar.h"

namespace m3::engine::server {

class StructuredOutputCompiler {
 public:
  // Reads <model_dir>/tokenizer.json. A model directory without one gives a compiler that
  // refuses every structured request (kInvalidArgument saying why) rather than failing start.
  static std::shared_ptr<StructuredOutputCompiler> Load(const std::string& model_dir,
                                                        int64_t vocab_size,
                                                        std::vector<int32_t> stop_ids);

  // Throws m3::Error(kInvalidArgument) naming the problem: a malformed schema / regex /
  // grammar, one over the compile limits (size, depth, time), an empty choice list.
  std::shared_ptr<const grammar::CompiledGrammar> Compile(
      const engine::v1::StructuredOutput& spec) const;

 private:
  std::unique_ptr<grammar::GrammarCompiler> plain_, tools_;
  std::string unavailable_;  // why there is no vocabulary, when there is none
};

}  // namespace m3::engine::server
