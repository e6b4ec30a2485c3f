// m3-bench-grammar: the grammar engine's speed on one core: compile time per schema (mask cache
// included, compiler cache off) and the time of one FillNextTokenBitmask over the states met
// while generating JSON for the schemas (random allowed tokens, as tests/grammar does), for the
// test tokenizer's vocabulary and for a 200,064-token byte-level vocabulary grown from it.
//
// The large vocabulary (the real MiniMax one is not on the dev machine): the 32,000 test tokens
// (their ids unchanged, so the stop token stays special) plus deterministic extra tokens up to
// 200,064, drawn with a fixed seed from: concatenations of two existing tokens (the shape BPE
// merges take; <= 16 bytes), substrings of the tokenizer corpus (multilingual, UTF-8 aligned),
// whitespace / indentation runs and code fragments, punctuation runs over JSON's and code's
// symbols (the tokens that make JSON masks context-dependent, like `"},` and `":"`), and short
// CJK / Cyrillic / Arabic / emoji sequences. Duplicates are skipped.
//
// Usage: m3-bench-grammar [--tokenizer tokenizer.json] [--schemas dir] [--walks N] [--json out]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_ir.h"
#include "shared/error.h"

namespace {

using m3::grammar::GrammarCompiler;
using m3::grammar::GrammarMatcher;
using m3::grammar::TokenizerVocab;
using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw m3::Error(m3::ErrorCode::kNotFound, "cannot open '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The 200,064-token vocabulary described at the top of this file.
std::shared_ptr<const TokenizerVocab> GrowVocab(const TokenizerVocab& base,
                                                const std::vector<std::string>& corpus,
                                                size_t target) {
  std::vector<std::string> tokens;
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < base.size(); ++i) {
    tokens.push_back(base.bytes(static_cast<int32_t>(i)));
    seen.insert(tokens.back());
  }
  std::vector<int32_t> special;
  for (size_t i = 0; i < base.size(); ++i)
    if (!base.matchable(static_cast<int32_t>(i)) && !base.is_stop(static_cast<int32_t>(i)))
      special.push_back(static_cast<int32_t>(i));
  std::vector<std::string> words;  // matchable base tokens
  for (int32_t id : base.sorted_ids()) words.push_back(base.bytes(id));
  std::mt19937_64 rng(20261128);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::string punct = "{}[]()\":,.;'<>/\\|=+-*&%$#@!?_`~^";
  const std::vector<std::string> code = {"return",  "const", "function", "self.", "def ",
                                         "import ", "=>",    "->",       "::",    "#include",
                                         "std::",   "null",  "true",     "false", "None",
                                         "else",    "elif",  "while",    "for ",  "int "};
  const std::vector<uint32_t> script_starts = {0x4E00,  0x3040, 0x0410, 0x0627, 0xAC00,
                                               0x1F600, 0x0E01, 0x0905, 0x05D0};
  std::string all_corpus;
  for (const auto& c : corpus) all_corpus += c;
  while (tokens.size() < target) {
    std::string t;
    size_t kind = pick(90);
    if (kind < 50) {
      t = words[pick(words.size())] + words[pick(words.size())];
      if (t.size() > 16) continue;
    } else if (kind < 62 && !all_corpus.empty()) {
      size_t start = pick(all_corpus.size());
      size_t len = 2 + pick(10);
      while (start < all_corpus.size() && (all_corpus[start] & 0xC0) == 0x80) ++start;
      size_t end = std::min(all_corpus.size(), start + len);
      while (end < all_corpus.size() && (all_corpus[end] & 0xC0) == 0x80) ++end;
      t = all_corpus.substr(start, end - start);
    } else if (kind < 70) {
      static const char* ws[] = {" ", "\t", "\n", "\r\n"};
      size_t n = 1 + pick(24);
      for (size_t i = 0; i < n; ++i) t += ws[pick(i == 0 ? 4 : 2)];
      if (pick(2)) t += code[pick(code.size())];
    } else if (kind < 74) {
      size_t n = 2 + pick(3);
      for (size_t i = 0; i < n; ++i) t.push_back(punct[pick(punct.size())]);
      if (pick(3) == 0) t = " " + t;
    } else {
      uint32_t base_cp = script_starts[pick(script_starts.size())];
      size_t n = 1 + pick(3);
      if (pick(2)) t = " ";
      for (size_t i = 0; i < n; ++i)
        m3::grammar::AppendUtf8(base_cp + static_cast<uint32_t>(pick(200)), t);
    }
    if (t.empty() || !seen.insert(t).second) continue;
    tokens.push_back(std::move(t));
  }
  return std::make_shared<const TokenizerVocab>(std::move(tokens), base.stop_ids(), special);
}

struct Stats {
  std::vector<double> us;
  void Add(double v) { us.push_back(v); }
  double Quantile(double q) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
  }
};

// A schema's text, or "tools:" followed by a JSON list of tool parameter schemas: the M3
// tool-call structural grammar for those tools (kM3Xml arguments; NS spelled in plain text).
std::shared_ptr<const m3::grammar::CompiledGrammar> Compile(GrammarCompiler& compiler,
                                                            const std::string& text) {
  if (text.rfind("tools:", 0) != 0) return compiler.CompileJsonSchema(text);
  const std::string ns = "]<]minimax[>[";
  m3::grammar::StructuralSpec spec;
  spec.prefix = ns + "<tool_call>\n";
  spec.suffix = ns + "</tool_call>";
  spec.max_count = -1;
  auto tools = nlohmann::json::parse(text.substr(6));
  for (size_t i = 0; i < tools.size(); ++i) {
    m3::grammar::StructuralTag t;
    t.begin = ns + "<invoke name=\"tool_" + std::to_string(i) + "\">";
    t.schema_json = tools[i].dump();
    t.format = m3::grammar::ArgumentFormat::kM3Xml;
    t.xml_tag_prefix = ns;
    t.end = ns + "</invoke>\n";
    spec.tags.push_back(t);
  }
  return compiler.CompileStructural(spec);
}

nlohmann::json RunVocab(const std::string& name, std::shared_ptr<const TokenizerVocab> vocab,
                        const std::vector<std::pair<std::string, std::string>>& schemas,
                        int walks) {
  nlohmann::json out;
  out["vocab"] = name;
  out["vocab_size"] = vocab->size();
  Stats mask_all, compile_all;
  nlohmann::json per_schema = nlohmann::json::array();
  std::vector<uint32_t> mask(vocab->mask_words());
  std::mt19937_64 rng(42);
  Stats cold_all, eager_all, accept_all;
  for (const auto& [schema_name, text] : schemas) {
    m3::grammar::CompileLimits lazy_limits;
    GrammarCompiler compiler(vocab, lazy_limits, 0);
    std::shared_ptr<const m3::grammar::CompiledGrammar> g;
    Stats compile;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      g = Compile(compiler, text);
      compile.Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    double compile_ms = compile.Quantile(0.5) / 1000;
    compile_all.Add(compile_ms);
    // Every state's mask at compile time (CompileLimits::precompute_masks).
    m3::grammar::CompileLimits eager_limits;
    eager_limits.precompute_masks = true;
    eager_limits.max_compile_ms = 600000;
    GrammarCompiler eager(vocab, eager_limits, 0);
    auto t_eager = Clock::now();
    auto full = Compile(eager, text);
    double eager_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_eager).count();
    eager_all.Add(eager_ms);
    // Cold: walks on the fresh lazy grammar (a state's first mask includes its trie walk).
    Stats cold, masks;
    std::vector<std::vector<int32_t>> sequences;
    for (int w = 0; w < walks; ++w) {
      GrammarMatcher m(g);
      std::vector<int32_t> allowed, closing, sequence;
      for (int step = 0; step < 600; ++step) {
        auto t0 = Clock::now();
        m.FillNextTokenBitmask(mask.data());
        double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        cold.Add(us);
        cold_all.Add(us);
        allowed.clear();
        closing.clear();
        for (size_t i = 0; i < mask.size(); ++i)
          for (uint32_t bits = mask[i]; bits; bits &= bits - 1) {
            auto id = static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(bits)));
            allowed.push_back(id);
            const std::string& b = vocab->bytes(id);
            if (vocab->is_stop(id) ||
                (step > 40 && b.size() <= 2 && b.find_first_not_of("\"]},") == std::string::npos))
              closing.push_back(id);
          }
        if (allowed.empty()) break;
        const auto& pool = !closing.empty() && (step > 40 || rng() % 4 == 0) ? closing : allowed;
        int32_t id = pool[rng() % pool.size()];
        m.AcceptToken(id);
        sequence.push_back(id);
        if (m.IsTerminated()) break;
      }
      sequences.push_back(std::move(sequence));
    }
    // Warm: the same generations replayed, every state's mask cached.
    for (const auto& sequence : sequences) {
      GrammarMatcher m(g);
      for (int32_t id : sequence) {
        auto t0 = Clock::now();
        m.FillNextTokenBitmask(mask.data());
        auto t1 = Clock::now();
        m.AcceptToken(id);
        auto t2 = Clock::now();
        double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
        masks.Add(us);
        mask_all.Add(us);
        accept_all.Add(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
    }
    per_schema.push_back(
        {{"schema", schema_name},
         {"compile_ms", compile_ms},
         {"compile_with_all_masks_ms", eager_ms},
         {"states", g->data().automaton.num_states()},
         {"memory_kib_all_masks", static_cast<double>(full->memory_bytes()) / 1024},
         {"mask_us_median", masks.Quantile(0.5)},
         {"mask_us_p99", masks.Quantile(0.99)},
         {"mask_us_max", masks.Quantile(1.0)},
         {"cold_mask_us_median", cold.Quantile(0.5)},
         {"cold_mask_us_max", cold.Quantile(1.0)},
         {"masks", masks.us.size()}});
    std::fprintf(stderr,
                 "%-26s compile %7.2f ms (all masks %8.1f ms)  warm mask median %6.2f us p99 "
                 "%8.2f us  cold max %8.1f us (%zu)\n",
                 schema_name.c_str(), compile_ms, eager_ms, masks.Quantile(0.5),
                 masks.Quantile(0.99), cold.Quantile(1.0), masks.us.size());
  }
  out["accept_token_us"] = {{"median", accept_all.Quantile(0.5)},
                            {"p99", accept_all.Quantile(0.99)},
                            {"max", accept_all.Quantile(1.0)}};
  out["cold_mask_us"] = {{"median", cold_all.Quantile(0.5)},
                         {"p90", cold_all.Quantile(0.9)},
                         {"p99", cold_all.Quantile(0.99)},
                         {"max", cold_all.Quantile(1.0)}};
  out["compile_with_all_masks_ms"] = {{"median", eager_all.Quantile(0.5)},
                                      {"p90", eager_all.Quantile(0.9)},
                                      {"max", eager_all.Quantile(1.0)}};
  out["schemas"] = per_schema;
  out["mask_us"] = {{"median", mask_all.Quantile(0.5)},
                    {"p90", mask_all.Quantile(0.9)},
                    {"p99", mask_all.Quantile(0.99)},
                    {"max", mask_all.Quantile(1.0)},
                    {"count", mask_all.us.size()}};
  out["compile_ms"] = {{"median", compile_all.Quantile(0.5)},
                       {"p90", compile_all.Quantile(0.9)},
                       {"max", compile_all.Quantile(1.0)}};
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string tokenizer = "tests/data/tokenizer/tokenizer.json";
    std::string schema_dir = "tests/data/grammar/schemas";
    std::string corpus_path = "tests/data/tokenizer/corpus.json";
    std::string json_out;
    int walks = 3;
    size_t big = 200064;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string a = argv[i], v = argv[i + 1];
      if (a == "--tokenizer")
        tokenizer = v;
      else if (a == "--schemas")
        schema_dir = v;
      else if (a == "--corpus")
        corpus_path = v;
      else if (a == "--walks")
        walks = std::stoi(v);
      else if (a == "--json")
        json_out = v;
      else if (a == "--big-vocab")
        big = std::stoul(v);
      else
        throw m3::Error(m3::ErrorCode::kInvalidArgument, "unknown option " + a);
    }
    std::vector<std::pair<std::string, std::string>> schemas;
    for (const auto& e : std::filesystem::directory_iterator(schema_dir))
      if (e.path().extension() == ".json")
        schemas.push_back({e.path().stem().string(), ReadAll(e.path().string())});
    std::sort(schemas.begin(), schemas.end());
    // The M3 tool call over three of the schemas as tools.
    std::string tools = "tools:[";
    for (const auto& [n, t] : schemas)
      if (n == "weather_tool" || n == "calendar_event" || n == "sql_query")
        tools += (tools.size() > 7 ? "," : "") + t;
    if (tools.size() > 7) schemas.push_back({"~m3_tool_call_3_tools", tools + "]"});
    auto t0 = Clock::now();
    auto base = TokenizerVocab::FromHuggingFaceJson(ReadAll(tokenizer), {});
    double base_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::vector<std::string> corpus = nlohmann::json::parse(ReadAll(corpus_path));
    nlohmann::json report;
    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    report["date"] = date;
    report["schemas"] = schemas.size();
    report["walks_per_schema"] = walks;
    report["base_vocab_load_ms"] = base_ms;
    report["runs"] = nlohmann::json::array();
    report["runs"].push_back(RunVocab("test tokenizer", base, schemas, walks));
    if (big > base->size()) {
      t0 = Clock::now();
      auto grown = GrowVocab(*base, corpus, big);
      report["big_vocab_build_ms"] =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      report["runs"].push_back(RunVocab("grown byte-level", grown, schemas, walks));
    }
    for (const auto& r : report["runs"])
      std::fprintf(stderr,
                   "%s (%zu tokens): warm mask median %.2f us, p90 %.2f, p99 %.2f, max %.2f over "
                   "%zu states; compile median %.2f ms, p90 %.2f, max %.2f; with all masks median "
                   "%.1f ms, p90 %.1f, max %.1f; cold mask p99 %.1f us, max %.1f\n",
                   r["vocab"].get<std::string>().c_str(), r["vocab_size"].get<size_t>(),
                   r["mask_us"]["median"].get<double>(), r["mask_us"]["p90"].get<double>(),
                   r["mask_us"]["p99"].get<double>(), r["mask_us"]["max"].get<double>(),
                   r["mask_us"]["count"].get<size_t>(), r["compile_ms"]["median"].get<double>(),
                   r["compile_ms"]["p90"].get<double>(), r["compile_ms"]["max"].get<double>(),
                   r["compile_with_all_masks_ms"]["median"].get<double>(),
                   r["compile_with_all_masks_ms"]["p90"].get<double>(),
                   r["compile_with_all_masks_ms"]["max"].get<double>(),
                   r["cold_mask_us"]["p99"].get<double>(), r["cold_mask_us"]["max"].get<double>());
    std::string text = report.dump(2);
    if (!json_out.empty()) {
      std::ofstream(json_out) << text << "\n";
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-grammar: %s\n", e.what());
    return 1;
  }
}
