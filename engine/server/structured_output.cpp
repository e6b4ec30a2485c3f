// StructuredOutputCompiler: tokenizer.json -> vocabularies; StructuredOutput -> grammar.
#include "engine/server/structured_output.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "shared/error.h"
#include "shared/log.h"

namespace m3::engine::server {
namespace {

namespace v1 = engine::v1;

// The chat formats' markers a tool-call grammar writes (M3, M2) and the think tags the model
// may open before a call.
const std::vector<std::string> kToolMarkers = {
    "]<]minimax[>[", "<minimax:tool_call>", "</minimax:tool_call>",
    "<mm:think>",    "</mm:think>",         "<think>",
    "</think>"};

}  // namespace

std::shared_ptr<StructuredOutputCompiler> StructuredOutputCompiler::Load(
    const std::string& model_dir, int64_t vocab_size, std::vector<int32_t> stop_ids) {
  auto c = std::make_shared<StructuredOutputCompiler>();
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    c->unavailable_ =
        "structured outputs need the model's tokenizer.json, which " + path.string() + " is not";
    return c;
  }
  std::stringstream text;
  text << in.rdbuf();
  grammar::TokenizerVocab::HfOptions plain;
  plain.stop_ids = stop_ids;
  plain.vocab_size = static_cast<size_t>(vocab_size);
  grammar::TokenizerVocab::HfOptions tools = plain;
  tools.matchable_added_tokens = kToolMarkers;
  c->plain_ = std::make_unique<grammar::GrammarCompiler>(
      grammar::TokenizerVocab::FromHuggingFaceJson(text.str(), plain));
  c->tools_ = std::make_unique<grammar::GrammarCompiler>(
      grammar::TokenizerVocab::FromHuggingFaceJson(text.str(), tools));
  return c;
}

std::shared_ptr<const grammar::CompiledGrammar> StructuredOutputCompiler::Compile(
    const v1::StructuredOutput& s) const {
  Require(unavailable_.empty(), ErrorCode::kInvalidArgument, unavailable_);
  grammar::JsonSchemaOptions json;
  json.any_whitespace = s.any_whitespace();
  json.strict = !s.non_strict();
  try {
    switch (s.constraint_case()) {
      case v1::StructuredOutput::kJsonSchema:
        return plain_->CompileJsonSchema(s.json_schema(), json);
      case v1::StructuredOutput::kJsonObject:
        return plain_->CompileJsonObject(json);
      case v1::StructuredOutput::kRegex:
        return plain_->CompileRegex(s.regex());
      case v1::StructuredOutput::kChoice: {
        Require(s.choice().choices_size() > 0, ErrorCode::kInvalidArgument,
                "structured output: the choice list is empty");
        return plain_->CompileChoice({s.choice().choices().begin(), s.choice().choices().end()});
      }
      case v1::StructuredOutput::kGrammar:
        return plain_->CompileEbnf(s.grammar());
      case v1::StructuredOutput::kStructural: {
        const v1::StructuredOutput::Structural& in = s.structural();
        grammar::StructuralSpec spec;
        spec.allow_free_text = in.allow_free_text();
        spec.prefix = in.prefix();
        spec.separator = in.separator();
        spec.suffix = in.suffix();
        spec.min_count = in.min_count();
        spec.max_count = in.max_count();
        spec.json_options = json;
        Require(in.tags_size() > 0, ErrorCode::kInvalidArgument,
                "structured output: a structural format needs at least one tag");
        for (const v1::StructuredOutput::Tag& t : in.tags()) {
          grammar::StructuralTag tag;
          tag.begin = t.begin();
          tag.schema_json = t.schema_json();
          tag.format = t.m3_xml()   ? grammar::ArgumentFormat::kM3Xml
                       : t.m2_xml() ? grammar::ArgumentFormat::kM2Xml
                                    : grammar::ArgumentFormat::kJson;
          tag.xml_tag_prefix = t.xml_tag_prefix();
          tag.end = t.end();
          spec.tags.push_back(std::move(tag));
        }
        return tools_->CompileStructural(spec);
      }
      case v1::StructuredOutput::CONSTRAINT_NOT_SET:
        break;
    }
  } catch (const Error& e) {
    // Too large, too deep or too slow to compile is the request's problem too: a 400.
    if (e.code() == ErrorCode::kInvalidArgument) throw;
    throw Error(ErrorCode::kInvalidArgument, std::string("structured output: ") + e.what());
  }
  throw Error(ErrorCode::kInvalidArgument, "structured output: no constraint given");
}

}  // namespace m3::engine::server
