// libFuzzer entry point for the grammar compilers and matcher: the first byte picks the source
// kind (0: JSON Schema, 1: regex, 2: EBNF, 3: choice list split at '\n'), the rest is the
// source. A compile may fail only with m3::Error (never crash, hang past its time limit or
// throw anything else); a grammar that compiles is walked for a few steps, each allowed token
// checked against AcceptToken. A violation aborts with the reason, so libFuzzer saves the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace {

std::shared_ptr<const m3::grammar::TokenizerVocab> FuzzVocab() {
  // Every single byte, plus multi-byte tokens shaped like JSON and text pieces; the last id is
  // the stop token.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"\":",  "\",", "\"}", "},",  "{\"", "[\"",  "\"]",     "true", "null", "false",
        " the", "ing", "12",  "0.5", "\\n", "\\\"", "<invoke", "</",   "é",    "日本"})
    tokens.push_back(t);
  tokens.push_back("</s>");
  auto stop = static_cast<int32_t>(tokens.size() - 1);
  return std::make_shared<const m3::grammar::TokenizerVocab>(std::move(tokens),
                                                             std::vector<int32_t>{stop});
}

[[noreturn]] void Violation(const std::string& what) {
  std::fprintf(stderr, "property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static auto vocab = FuzzVocab();
  m3::grammar::CompileLimits limits;
  limits.max_compile_ms = 2000;
  limits.max_states = 20000;
  limits.max_repeat = 200;
  limits.precompute_masks = true;
  m3::grammar::GrammarCompiler compiler(vocab, limits, 0);
  const std::string_view src(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::shared_ptr<const m3::grammar::CompiledGrammar> g;
  try {
    switch (data[0] & 3) {
      case 0:
        g = compiler.CompileJsonSchema(src);
        break;
      case 1:
        g = compiler.CompileRegex(src);
        break;
      case 2:
        g = compiler.CompileEbnf(src);
        break;
      default: {
        std::vector<std::string> choices;
        size_t start = 0;
        for (size_t i = 0; i <= src.size(); ++i)
          if (i == src.size() || src[i] == '\n') {
            choices.emplace_back(src.substr(start, i - start));
            start = i + 1;
          }
        g = compiler.CompileChoice(choices);
      }
    }
  } catch (const m3::Error&) {
    return 0;
  } catch (const std::exception& e) {
    Violation(std::string("non-m3::Error exception: ") + e.what());
  }
  m3::grammar::GrammarMatcher m(g);
  std::vector<uint32_t> mask(vocab->mask_words());
  uint64_t seed = size * 0x9E3779B97F4A7C15ull;
  for (int step = 0; step < 64 && !m.IsTerminated(); ++step) {
    m.FillNextTokenBitmask(mask.data());
    std::vector<int32_t> allowed;
    for (size_t i = 0; i < vocab->size(); ++i)
      if (mask[i / 32] >> (i % 32) & 1u) allowed.push_back(static_cast<int32_t>(i));
    if (allowed.empty()) {
      if (!m.IsDeadEnd() && !m.CanTerminate()) return 0;  // no token of this vocab fits
      return 0;
    }
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int32_t id = allowed[(seed >> 33) % allowed.size()];
    if (!m.AcceptToken(id)) Violation("an allowed token was refused");
  }
  return 0;
}
