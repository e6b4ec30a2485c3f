// The public API of the grammar engine (issue 38): compiling JSON Schema, JSON objects, regular
// expressions, GBNF-style EBNF, choices and structural (tool-call) formats into byte-level
// pushdown automata over a tokenizer's vocabulary, and matching generated tokens against them
// with a per-token bitmask of allowed next tokens. No dependency on the gateway or the engine.
//
// Errors: every Compile* throws m3::Error (shared/error.h) naming the problem:
//   kInvalidArgument  malformed schema / regex / grammar, unknown rule, unsupported keyword value
//   kTooLarge         over a CompileLimits bound (grammar size, automaton states, nesting depth)
//   kDeadlineExceeded compile time over CompileLimits::max_compile_ms
// Threads: TokenizerVocab, CompiledGrammar and GrammarCompiler are safe to share across threads
// (the compiler's cache is locked); a GrammarMatcher belongs to one sequence (one thread at a
// time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/error.h"

namespace m3::grammar {

struct VocabTrie;  // grammar/vocab_trie.h

// The token byte strings of a vocabulary. Token i matches bytes(i) when matchable(i); special
// tokens (added tokens such as eos, <think>) are not matchable unless the vocab was built with
// them listed as matchable, so a grammar never produces them by accident. Stop tokens (eos and
// friends) are allowed by the mask exactly when the grammar can end.
class TokenizerVocab {
 public:
  // tokens[i]: the bytes of token i (empty: never matchable). special_ids: ids never matched by
  // their bytes. stop_ids: the ids that end a generation (never matched by their bytes either;
  // allowed exactly when the grammar can end).
  TokenizerVocab(std::vector<std::string> tokens, std::vector<int32_t> stop_ids,
                 std::vector<int32_t> special_ids = {});

  struct HfOptions {
    // The stop ids (eos and any others); when empty, the added tokens whose content is one of
    // `stop_token_contents` are used.
    std::vector<int32_t> stop_ids;
    std::vector<std::string> stop_token_contents = {"[e~[", "</s>", "<|endoftext|>", "<|im_end|>"};
    // Added (special) tokens that the grammar may produce by their text, e.g. the tool-call
    // markers "]<]minimax[>[" or "<minimax:tool_call>" so a structural grammar can emit them.
    std::vector<std::string> matchable_added_tokens;
    // The size of the model's logits (>= the tokenizer's ids); ids past the tokenizer's are
    // empty, never allowed. 0: the tokenizer's own size.
    size_t vocab_size = 0;
  };
  // A HuggingFace tokenizer.json (its text): byte-level BPE (GPT-2 byte-to-unicode mapping) or
  // metaspace / sentencepiece ("\u2581" for space, <0xXX> byte tokens). Throws kInvalidArgument.
  static std::shared_ptr<const TokenizerVocab> FromHuggingFaceJson(std::string_view tokenizer_json,
                                                                   const HfOptions& options);

  size_t size() const { return tokens_.size(); }
  const std::string& bytes(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool matchable(int32_t id) const { return matchable_[static_cast<size_t>(id)] != 0; }
  bool is_stop(int32_t id) const { return is_stop_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // Matchable ids ordered by their bytes (lexicographic): neighbours share prefixes, so a walk
  // over a trie of them shares work.
  const std::vector<int32_t>& sorted_ids() const { return sorted_ids_; }
  // For sorted_ids()[k]: the length of the common prefix with sorted_ids()[k-1] (0 for k = 0).
  const std::vector<uint16_t>& shared_prefix() const { return shared_prefix_; }
  // Words of a bitmask covering the vocabulary: ceil(size / 32).
  size_t mask_words() const { return (tokens_.size() + 31) / 32; }
  // A stable hash of the token bytes, stop ids and matchability (part of cache keys).
  uint64_t fingerprint() const { return fingerprint_; }
  const VocabTrie& trie() const { return *trie_; }

 private:
  std::vector<std::string> tokens_;
  std::vector<uint8_t> matchable_;
  std::vector<uint8_t> is_stop_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> sorted_ids_;
  std::vector<uint16_t> shared_prefix_;
  uint64_t fingerprint_ = 0;
  std::shared_ptr<const VocabTrie> trie_;
};

// Bounds on what one compile may cost; over a bound: an Error naming it.
struct CompileLimits {
  size_t max_source_bytes = size_t{1} << 20;  // schema / regex / grammar text
  size_t max_rules = 20000;                   // rules after expanding the source
  size_t max_states = 200000;                 // automaton states over all rules
  int max_depth = 64;                         // nesting of schemas, groups, expressions
  int max_repeat = 1000;                      // a bounded repeat {m,n}, minItems/maxItems, ...
  int max_compile_ms = 5000;                  // wall time of one compile, mask cache included
  // true: every state's token mask is computed at compile time (the first tokens cost nothing
  // more, compiles of string-heavy schemas over a 200K vocabulary take seconds); false: a
  // state's mask is computed the first time a matcher reaches it (compiles take milliseconds,
  // a new state's first mask a trie walk: ~0.1-30 ms), then cached in the CompiledGrammar.
  bool precompute_masks = false;
};

struct JsonSchemaOptions {
  // false: compact JSON (no whitespace, "," and ":" with no spaces) - what the model is steered
  // to; true: whitespace allowed between tokens, at most max_whitespace bytes per run.
  bool any_whitespace = false;
  int max_whitespace = 16;
  // true (OpenAI strict): properties not listed are never generated, whatever
  // additionalProperties says ("required" is honoured as written). false: additionalProperties
  // true (the default) / a schema allows extra keys after the listed ones.
  bool strict = true;
};

// Where a value encoded in M3's tool-call XML sits (the M3 template's to_xml rendering).
enum class ArgumentFormat {
  kJson,   // the segment's text is one JSON value following the schema
  kM3Xml,  // the segment's text is the schema's object rendered as M3 parameter tags:
           // <name>value</name> per property (in order, required ones present), strings raw,
           // numbers / booleans / null as JSON text, objects as nested tags, arrays as
           // repeated <item>...</item>; each tag preceded by `xml_tag_prefix`
  kM2Xml,  // the M2 template's rendering: per property (in order, required ones present)
           // <parameter name="k">value</parameter> and a newline, string values raw, other
           // values compact JSON
};

// One alternative of a structural segment: begin text, a constrained body, end text.
// For M3: begin = NS "<invoke name=\"get_weather\">", body = the tool's parameters schema in
// kM3Xml, end = NS "</invoke>", with xml_tag_prefix = NS (the "]<]minimax[>[" namespace token).
struct StructuralTag {
  std::string begin;
  std::string schema_json;  // empty: any text not containing `end`
  ArgumentFormat format = ArgumentFormat::kJson;
  std::string xml_tag_prefix;  // kM3Xml: the text before each parameter tag (open and close)
  std::string end;
};

// A structural format: [free text] prefix, then min_count..max_count tags (each one of `tags`)
// separated by `separator`, then suffix. For M3 tool_choice "required":
//   prefix = NS "<tool_call>" "\n", tags = one per tool, separator = "\n",
//   suffix = "\n" NS "</tool_call>", min_count = 1, max_count = parallel ? -1 : 1.
struct StructuralSpec {
  // Whether the model may write text before `prefix` (e.g. reasoning): any text not containing
  // `prefix` (its length is bounded by max_tokens, not by the grammar). false: the output
  // starts with prefix.
  bool allow_free_text = false;
  std::string prefix;
  std::vector<StructuralTag> tags;
  std::string separator;
  int min_count = 1;
  int max_count = 1;  // -1: unbounded
  std::string suffix;
  JsonSchemaOptions json_options;
};

struct CompiledGrammarData;  // the automaton and mask cache (grammar/compiled_grammar.h)

// An immutable compiled grammar bound to one vocabulary; share it across threads and matchers.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(std::shared_ptr<const CompiledGrammarData> data);
  const TokenizerVocab& vocab() const;
  const std::shared_ptr<const TokenizerVocab>& vocab_ptr() const;
  const CompiledGrammarData& data() const { return *data_; }
  size_t memory_bytes() const;  // the automaton and mask cache
  // The grammar in GBNF text (after lowering a schema / regex), for logs and debugging.
  std::string DebugText() const;
  // Computes every state's token mask now (what CompileLimits::precompute_masks does at compile
  // time), e.g. on a background thread right after a lazy compile so that no decoding step pays
  // for a state's first mask. Safe while matchers use the grammar. Throws kDeadlineExceeded
  // past deadline_ms (the masks computed so far stay).
  void WarmMasks(int deadline_ms = 60000) const;
  // States whose mask is computed / all scanning states.
  size_t masks_ready() const;

 private:
  std::shared_ptr<const CompiledGrammarData> data_;
};

class GrammarCompiler {
 public:
  // cache_entries: compiled grammars kept, keyed by (kind, text, options); 0 disables.
  // cache_bytes: their memory bound (masks included, which grow as they are used), checked on
  // every compile call; the least recently used go first.
  explicit GrammarCompiler(std::shared_ptr<const TokenizerVocab> vocab, CompileLimits limits = {},
                           size_t cache_entries = 256, size_t cache_bytes = size_t{1} << 30);
  ~GrammarCompiler();

  std::shared_ptr<const CompiledGrammar> CompileJsonSchema(std::string_view schema_json,
                                                           const JsonSchemaOptions& options = {});
  // Any JSON object (response_format json_object).
  std::shared_ptr<const CompiledGrammar> CompileJsonObject(const JsonSchemaOptions& options = {});
  // A full match of an ECMAScript-style regular expression over UTF-8 text.
  std::shared_ptr<const CompiledGrammar> CompileRegex(std::string_view regex);
  // GBNF: `name ::= ...` rules, "strings", [classes], [^...], ( ), |, * + ? {m} {m,} {m,n}, .,
  // # comments.
  std::shared_ptr<const CompiledGrammar> CompileEbnf(std::string_view grammar,
                                                     std::string_view root_rule = "root");
  // Exactly one of the strings.
  std::shared_ptr<const CompiledGrammar> CompileChoice(const std::vector<std::string>& choices);
  std::shared_ptr<const CompiledGrammar> CompileStructural(const StructuralSpec& spec);

  // Cache statistics (for metrics and tests).
  size_t cache_hits() const;
  size_t cache_size() const;
  const TokenizerVocab& vocab() const { return *vocab_; }

 private:
  struct Cache;
  std::shared_ptr<const TokenizerVocab> vocab_;
  CompileLimits limits_;
  std::unique_ptr<Cache> cache_;
};

// The state of one generation against a compiled grammar.
class GrammarMatcher {
 public:
  // max_rollback: accepted tokens kept for Rollback (speculative decoding's draft length).
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int max_rollback = 16);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Advances by one token; false (state unchanged) when the grammar does not allow it. A stop
  // token is accepted when the grammar can end, and terminates the matcher.
  bool AcceptToken(int32_t token);
  // Advances by raw bytes (jump-forward, tests); false (state unchanged) when not allowed.
  bool AcceptBytes(std::string_view bytes);
  // words[ceil(vocab/32)]: bit i (words[i/32] >> (i%32) & 1) set = token i allowed now. Stop
  // tokens are set only when CanTerminate().
  void FillNextTokenBitmask(uint32_t* words);
  // The longest text every continuation must start with (for jump-forward decoding).
  std::string ForcedBytes(size_t max_bytes = 256) const;
  bool CanTerminate() const;  // the text so far is a complete match
  bool IsTerminated() const;  // a stop token was accepted
  // No token at all is allowed (nor can it terminate), or an ambiguous grammar needed more
  // than 4096 parallel parses for some text (that text was refused): end the choice.
  bool IsDeadEnd() const;
  // Undoes the last n accepted tokens (n <= accepted since construction or Reset, and <=
  // max_rollback; an AcceptBytes call counts as one); kInvalidArgument otherwise.
  void Rollback(int tokens);
  void Reset();
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct State;
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<State> state_;
};

}  // namespace m3::grammar
