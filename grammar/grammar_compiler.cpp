// GrammarCompiler: each source lowered to GrammarIr, built into an automaton, its token masks
// precomputed against the vocabulary (or left to first use); results kept in a bounded LRU cache
// keyed by a hash of (kind, text, options). Compiles of distinct keys run in parallel; the cache
// lock is held only to look up and insert.
#include <chrono>
#include <list>
#include <mutex>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/ebnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_parser.h"
#include "shared/bounded_json.h"

namespace m3::grammar {

struct GrammarCompiler::Cache {
  std::mutex mu;
  size_t capacity = 0;
  size_t max_bytes = 0;
  size_t hits = 0;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> index;
};

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenizerVocab> vocab, CompileLimits limits,
                                 size_t cache_entries, size_t cache_bytes)
    : vocab_(std::move(vocab)), limits_(limits), cache_(std::make_unique<Cache>()) {
  Require(vocab_ != nullptr, ErrorCode::kInvalidArgument, "GrammarCompiler: null vocabulary");
  cache_->capacity = cache_entries;
  cache_->max_bytes = cache_bytes;
}
GrammarCompiler::~GrammarCompiler() = default;

size_t GrammarCompiler::cache_hits() const {
  std::lock_guard lock(cache_->mu);
  return cache_->hits;
}
size_t GrammarCompiler::cache_size() const {
  std::lock_guard lock(cache_->mu);
  return cache_->lru.size();
}

namespace {

std::string Key(std::string_view kind, std::string_view text, std::string_view options) {
  // The full key (not only its hash) so a collision can never hand back the wrong grammar.
  std::string key;
  key.reserve(kind.size() + text.size() + options.size() + 16);
  key.append(kind).push_back('\0');
  key.append(options).push_back('\0');
  key.append(text);
  return key;
}

std::string OptionsKey(const JsonSchemaOptions& o) {
  return std::to_string(o.any_whitespace) + "," + std::to_string(o.max_whitespace) + "," +
         std::to_string(o.strict);
}

template <typename Lower>
std::shared_ptr<const CompiledGrammar> CompileWith(
    const std::shared_ptr<const TokenizerVocab>& vocab, const CompileLimits& limits,
    Lower&& lower) {
  auto started = std::chrono::steady_clock::now();
  GrammarIr ir(limits);
  lower(ir);
  auto data = std::make_shared<CompiledGrammarData>();
  data->vocab = vocab;
  data->automaton = BuildAutomaton(ir, limits);
  data->text = ir.ToText();
  data->InitMasks();
  if (limits.precompute_masks) {
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count();
    data->PrecomputeMasks(static_cast<int>(std::max<long long>(0, limits.max_compile_ms - spent)));
  }
  data->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return std::make_shared<const CompiledGrammar>(std::move(data));
}

nlohmann::ordered_json ParseSchema(std::string_view text, const CompileLimits& limits,
                                   const char* what) {
  Require(text.size() <= limits.max_source_bytes, ErrorCode::kTooLarge,
          std::string(what) + " longer than " + std::to_string(limits.max_source_bytes) +
              " bytes (CompileLimits::max_source_bytes)");
  JsonLimits jl;
  jl.max_depth = limits.max_depth * 2 + 8;
  try {
    return ParseBoundedOrderedJson(text, jl);
  } catch (const JsonBodyError& e) {
    if (e.slug() == "json_too_deep")
      throw Error(ErrorCode::kTooLarge, std::string(what) + " nested deeper than " +
                                            std::to_string(jl.max_depth) +
                                            " levels (CompileLimits::max_depth)");
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + " is not valid JSON: " + e.what());
  }
}

}  // namespace

// CacheT is GrammarCompiler::Cache, deduced (the type is private to the compiler).
template <typename CacheT, typename Lower>
static std::shared_ptr<const CompiledGrammar> Cached(CacheT& cache, const std::string& key,
                                                     Lower&& compile) {
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.index.find(key);
    if (it != cache.index.end()) {
      cache.lru.splice(cache.lru.begin(), cache.lru, it->second);
      ++cache.hits;
      return it->second->second;
    }
  }
  auto grammar = compile();
  std::lock_guard lock(cache.mu);
  if (cache.capacity == 0 || cache.index.count(key)) return grammar;
  cache.lru.emplace_front(key, grammar);
  cache.index[key] = cache.lru.begin();
  // Masks grow with use, so the memory bound is re-checked on every insertion.
  size_t bytes = 0;
  for (const auto& entry : cache.lru) bytes += entry.second->memory_bytes() + entry.first.size();
  while (cache.lru.size() > 1 && (cache.lru.size() > cache.capacity || bytes > cache.max_bytes)) {
    bytes -=
        std::min(bytes, cache.lru.back().second->memory_bytes() + cache.lru.back().first.size());
    cache.index.erase(cache.lru.back().first);
    cache.lru.pop_back();
  }
  return grammar;
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileJsonSchema(
    std::string_view schema_json, const JsonSchemaOptions& options) {
  return Cached(*cache_, Key("json_schema", schema_json, OptionsKey(options)), [&] {
    auto schema = ParseSchema(schema_json, limits_, "JSON schema");
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) {
      RuleId root = ir.AddRule("root");
      ir.root = root;
      ir.SetBody(root, ConvertJsonSchema(ir, schema, options));
    });
  });
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileJsonObject(
    const JsonSchemaOptions& options) {
  return Cached(*cache_, Key("json_object", "", OptionsKey(options)), [&] {
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) {
      RuleId root = ir.AddRule("root");
      ir.root = root;
      ir.SetBody(root, AnyJsonObject(ir, options));
    });
  });
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileRegex(std::string_view regex) {
  return Cached(*cache_, Key("regex", regex, ""), [&] {
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) {
      RuleId root = ir.AddRule("root");
      ir.root = root;
      ir.SetBody(root, ParseRegex(ir, regex));
    });
  });
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileEbnf(std::string_view grammar,
                                                                    std::string_view root_rule) {
  return Cached(*cache_, Key("ebnf", grammar, root_rule), [&] {
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) { ParseEbnf(ir, grammar, root_rule); });
  });
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileChoice(
    const std::vector<std::string>& choices) {
  Require(!choices.empty(), ErrorCode::kInvalidArgument, "choice: the list of choices is empty");
  std::string text;
  for (const auto& c : choices) {
    text += std::to_string(c.size()) + ":" + c;
  }
  Require(text.size() <= limits_.max_source_bytes, ErrorCode::kTooLarge,
          "choice: the choices exceed " + std::to_string(limits_.max_source_bytes) + " bytes");
  return Cached(*cache_, Key("choice", text, ""), [&] {
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) {
      RuleId root = ir.AddRule("root");
      ir.root = root;
      std::vector<ExprId> alts;
      for (const auto& c : choices) alts.push_back(ir.Literal(c));
      ir.SetBody(root, ir.Choice(std::move(alts)));
    });
  });
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::CompileStructural(
    const StructuralSpec& spec) {
  Require(!spec.tags.empty(), ErrorCode::kInvalidArgument, "structural: no tags given");
  Require(spec.min_count >= 0 && (spec.max_count < 0 || spec.max_count >= spec.min_count),
          ErrorCode::kInvalidArgument,
          "structural: count bounds [" + std::to_string(spec.min_count) + ", " +
              std::to_string(spec.max_count) + "] are invalid");
  Require(!spec.allow_free_text || !spec.prefix.empty(), ErrorCode::kInvalidArgument,
          "structural: free text needs a non-empty prefix to end it");
  nlohmann::ordered_json key = {{"free", spec.allow_free_text},
                                {"prefix", spec.prefix},
                                {"sep", spec.separator},
                                {"min", spec.min_count},
                                {"max", spec.max_count},
                                {"suffix", spec.suffix},
                                {"ws", OptionsKey(spec.json_options)},
                                {"tags", nlohmann::ordered_json::array()}};
  for (const auto& t : spec.tags)
    key["tags"].push_back(
        {t.begin, t.schema_json, static_cast<int>(t.format), t.xml_tag_prefix, t.end});
  std::string key_text = key.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return Cached(*cache_, Key("structural", key_text, ""), [&] {
    std::vector<nlohmann::ordered_json> schemas;
    for (const auto& t : spec.tags)
      schemas.push_back(t.schema_json.empty() ? nlohmann::ordered_json()
                                              : ParseSchema(t.schema_json, limits_, "tag schema"));
    return CompileWith(vocab_, limits_, [&](GrammarIr& ir) {
      RuleId root = ir.AddRule("root");
      ir.root = root;
      std::vector<ExprId> alts;
      for (size_t i = 0; i < spec.tags.size(); ++i) {
        const StructuralTag& t = spec.tags[i];
        Require(!t.begin.empty(), ErrorCode::kInvalidArgument,
                "structural: tag " + std::to_string(i) + " has an empty begin");
        ExprId body;
        if (t.schema_json.empty()) {
          Require(!t.end.empty(), ErrorCode::kInvalidArgument,
                  "structural: tag " + std::to_string(i) + " has neither a schema nor an end");
          body = TextNotContaining(ir, t.end);
        } else {
          SchemaEncoding enc;
          enc.m3_xml = t.format == ArgumentFormat::kM3Xml;
          enc.m2_xml = t.format == ArgumentFormat::kM2Xml;
          Require(!enc.m2_xml || schemas[i].value("type", nlohmann::ordered_json()) == "object" ||
                      schemas[i].contains("properties"),
                  ErrorCode::kInvalidArgument,
                  "structural: tag " + std::to_string(i) +
                      ": the M2 parameter format needs an object schema");
          enc.xml_tag_prefix = t.xml_tag_prefix;
          try {
            body = ConvertJsonSchema(ir, schemas[i], spec.json_options, enc);
          } catch (const Error& e) {
            throw Error(e.code(),
                        "structural: tag " + std::to_string(i) + " (" + t.begin + "): " + e.what());
          }
        }
        alts.push_back(ir.Seq({ir.Literal(t.begin), body, ir.Literal(t.end)}));
      }
      RuleId one = ir.AddRule("tag");
      ir.SetBody(one, ir.Choice(std::move(alts)));
      ExprId sep_one = ir.Seq({ir.Literal(spec.separator), ir.Ref(one)});
      ExprId items;
      if (spec.max_count == 0) {
        items = ir.Empty();
      } else {
        int more_min = std::max(0, spec.min_count - 1);
        int more_max = spec.max_count < 0 ? -1 : spec.max_count - 1;
        items = ir.Seq({ir.Ref(one), ir.Repeat(sep_one, more_min, more_max)});
        if (spec.min_count == 0) items = ir.Optional(items);
      }
      std::vector<ExprId> seq;
      if (spec.allow_free_text) seq.push_back(TextNotContaining(ir, spec.prefix));
      seq.push_back(ir.Literal(spec.prefix));
      seq.push_back(items);
      seq.push_back(ir.Literal(spec.suffix));
      ir.SetBody(root, ir.Seq(std::move(seq)));
    });
  });
}

}  // namespace m3::grammar
