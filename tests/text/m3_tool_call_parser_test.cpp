// M3ToolCallParser: MiniMax-M3 tool calls (namespace-token tags, the parameter name as the tag,
// nested values), typed by the tool schema, streamed per parameter, the model's quirks, and
// malformed calls given back as content without losing the calls after them.
#include <doctest/doctest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "gateway/text/m3_tool_call_parser.h"
#include "tests/text/stream_util.h"

using m3::text::M3ToolCallParser;
using m3::text::ToolCall;
using m3::text::ToolSchema;
using Json = nlohmann::ordered_json;

namespace {

const std::string NS = "]<]minimax[>[";

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;   // joined by index
  std::vector<ToolCall> pieces;  // as streamed
};

void Take(Parsed& r, m3::text::ToolCallDelta d) {
  r.content += d.content;
  for (auto& piece : d.calls) {
    if (piece.index < r.calls.size()) {
      CHECK(piece.id.empty());
      CHECK(piece.name.empty());
      r.calls[piece.index].arguments += piece.arguments;
    } else {
      REQUIRE(piece.index == r.calls.size());
      CHECK(!piece.id.empty());
      r.calls.push_back(piece);
    }
    r.pieces.push_back(piece);
  }
}

Parsed Feed(const Json& tools, const std::vector<std::string>& chunks) {
  M3ToolCallParser p(ToolSchema(tools), [](size_t i) { return "call_" + std::to_string(i); });
  Parsed r;
  for (const auto& c : chunks) Take(r, p.Push(c));
  Take(r, p.Flush());
  return r;
}

// Parses whole, char by char and in random chunks: all must agree exactly. Returns the whole.
Parsed FeedAll(const Json& tools, const std::string& text) {
  auto one = Feed(tools, {text});
  auto check = [&](const Parsed& r) {
    CHECK(r.content == one.content);
    REQUIRE(r.calls.size() == one.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      CHECK(r.calls[i].name == one.calls[i].name);
      CHECK(r.calls[i].arguments == one.calls[i].arguments);
    }
  };
  check(Feed(tools, m3::test::CharChunks(text)));
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) check(Feed(tools, m3::test::RandomChunks(text, rng, 9)));
  for (const auto& c : one.calls) {
    CAPTURE(c.arguments);
    CHECK(Json::parse(c.arguments).is_object());
  }
  return one;
}

std::string Tag(const std::string& name, const std::string& inner) {
  return NS + "<" + name + ">" + inner + NS + "</" + name + ">";
}
std::string Invoke(const std::string& name, const std::string& params) {
  return NS + "<invoke name=\"" + name + "\">" + params + NS + "</invoke>\n";
}
std::string Block(const std::string& invokes) {
  return NS + "<tool_call>\n" + invokes + NS + "</tool_call>";
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "metric": {"type": "boolean"}, "threshold": {"type": "number"}, "code": {"type": "string"},
      "nothing": {"type": "null"},
      "options": {"type": "object", "properties": {"lang": {"type": "string"},
        "hours": {"type": "array", "items": {"type": "integer"}},
        "item": {"type": "string"}}},
      "stops": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "order": {"type": "integer"}}}},
      "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
      "empty_obj": {"type": "object", "properties": {}},
      "empty_list": {"type": "array", "items": {"type": "string"}},
      "note": {"type": "string"}}}}}
])");

}  // namespace

TEST_CASE("M3: one call, values typed by the schema, text around the block") {
  const std::string text =
      "Checking.\n" +
      Block(Invoke("get_weather", Tag("city", "São Paulo") + Tag("days", "3") +
                                      Tag("metric", "true") + Tag("threshold", "2.5") +
                                      Tag("code", "007") + Tag("nothing", "null"))) +
      " after";
  auto r = FeedAll(kTools, text);
  CHECK(r.content == "Checking.\n after");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "get_weather");
  CHECK(r.calls[0].id == "call_0");
  CHECK(
      r.calls[0].arguments ==
      R"({"city":"São Paulo","days":3,"metric":true,"threshold":2.5,"code":"007","nothing":null})");
}

TEST_CASE("M3: nested objects, arrays of items, arrays of objects and of arrays, empties") {
  const std::string params =
      Tag("options", Tag("lang", "de") + Tag("hours", Tag("item", "6") + Tag("item", "18")) +
                         Tag("item", "an object key named item")) +
      Tag("stops", Tag("item", Tag("name", "A") + Tag("order", "1")) +
                       Tag("item", Tag("name", "B") + Tag("order", "2"))) +
      Tag("matrix", Tag("item", Tag("item", "1") + Tag("item", "2.5")) + Tag("item", "")) +
      Tag("empty_obj", "") + Tag("empty_list", "") + Tag("note", "");
  auto r = FeedAll(kTools, Block(Invoke("get_weather", params)));
  REQUIRE(r.calls.size() == 1);
  CHECK(Json::parse(r.calls[0].arguments) == Json::parse(R"({
    "options": {"lang": "de", "hours": [6, 18], "item": "an object key named item"},
    "stops": [{"name": "A", "order": 1}, {"name": "B", "order": 2}],
    "matrix": [[1, 2.5], []], "empty_obj": {}, "empty_list": [], "note": ""})"));
}

TEST_CASE("M3: without a schema, JSON literals where they parse, else strings") {
  const std::string params = Tag("n", "7") + Tag("z", "007") + Tag("s", "hello world") +
                             Tag("b", "false") + Tag("l", "[1, 2]") +
                             Tag("o", Tag("a", "1") + Tag("b", "x")) +
                             Tag("arr", Tag("item", "true") + Tag("item", "z")) + Tag("e", "");
  auto r = FeedAll(Json::array(), Block(Invoke("anything", params)));
  REQUIRE(r.calls.size() == 1);
  CHECK(Json::parse(r.calls[0].arguments) ==
        Json::parse(R"({"n": 7, "z": "007", "s": "hello world", "b": false, "l": [1, 2],
                        "o": {"a": 1, "b": "x"}, "arr": [true, "z"], "e": ""})"));
}

TEST_CASE(
    "M3: streaming: the call's id and name when its invoke tag closes, then a fragment "
    "per parameter") {
  M3ToolCallParser p(ToolSchema(kTools), [](size_t i) { return "call_" + std::to_string(i); });
  auto d = p.Push(NS + "<tool_call>\n" + NS + "<invoke name=\"get_weather\"");
  CHECK(d.calls.empty());
  d = p.Push(">");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].id == "call_0");
  CHECK(d.calls[0].name == "get_weather");
  CHECK(d.calls[0].arguments.empty());
  d = p.Push(NS + "<city>Par");
  CHECK(d.calls.empty());
  d = p.Push("is" + NS + "</city>");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].arguments == R"({"city":"Paris")");
  CHECK(d.calls[0].id.empty());
  d = p.Push(NS + "<days>2" + NS + "</days>");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].arguments == R"(,"days":2)");
  d = p.Push(NS + "</invoke>\n" + NS + "<invoke name=\"get_weather\">");
  REQUIRE(d.calls.size() == 2);
  CHECK(d.calls[0].arguments == "}");
  CHECK(d.calls[1].index == 1);
  CHECK(d.calls[1].name == "get_weather");
  d = p.Push(NS + "</invoke>\n" + NS + "</tool_call>done");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].arguments == "{}");
  CHECK(d.content == "done");
  CHECK(p.Flush().content.empty());
}

TEST_CASE("M3: quirks: missing first opening tag, hyphenated names, whitespace after NS") {
  {
    auto r =
        FeedAll(Json::array(), Block(NS + "<invoke name=\"save_file\">" + NS + "offerta.docx" + NS +
                                     "</filename>" + Tag("content", "ciao") + NS + "</invoke>\n"));
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].arguments == R"({"filename":"offerta.docx","content":"ciao"})");
    CHECK(r.content.empty());
  }
  {
    auto r = FeedAll(
        Json::array(),
        Block(Invoke("search-docs", Tag("max-results", "5") + Tag("first name", "A" + NS + "nn"))));
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].name == "search-docs");
    CHECK(r.calls[0].arguments == R"({"max-results":5,"first name":"Ann"})");
  }
  {
    const std::string text = NS + " <tool_call>\n" + NS + "\n<invoke name='get_weather'>" + NS +
                             " <city>Oslo" + NS + "\t</city>" + NS + "  </invoke>\n" + NS +
                             " </tool_call>";
    auto r = FeedAll(kTools, text);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].arguments == R"({"city":"Oslo"})");
    CHECK(r.content.empty());
  }
}

TEST_CASE("M3: a malformed invoke is content and never drops the calls after it") {
  const std::string bad = NS + "<invoke nam=\"x\">" + Tag("a", "1") + NS + "</invoke>";
  const std::string text = Block(Invoke("get_weather", Tag("city", "A")) + bad + "\n" +
                                 "stray words\n" + Invoke("get_weather", Tag("city", "B")));
  auto r = FeedAll(kTools, text);
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].arguments == R"({"city":"A"})");
  CHECK(r.calls[1].arguments == R"({"city":"B"})");
  CHECK(r.content == bad + "stray words\n");
}

TEST_CASE("M3: a malformed parameter ends its call; its text is content; later calls parse") {
  const std::string broken = NS + "<days>3" + NS + "</oops>";
  const std::string text = Block(NS + "<invoke name=\"get_weather\">" + Tag("city", "A") + broken +
                                 NS + "</invoke>\n" + Invoke("get_weather", Tag("city", "B")));
  auto r = FeedAll(kTools, text);
  REQUIRE(r.calls.size() == 2);
  CHECK(r.calls[0].arguments == R"({"city":"A"})");
  CHECK(r.calls[1].arguments == R"({"city":"B"})");
  CHECK(r.content == broken + NS + "</invoke>");
}

TEST_CASE("M3: missing closes are survived; a cut-off output ends the call it was in") {
  {
    // A close tag further out closes the inner tags; a missing </invoke> ends at the next invoke.
    auto r = FeedAll(
        kTools, Block(NS + "<invoke name=\"get_weather\">" + NS + "<options>" + Tag("lang", "it") +
                      NS + "<hours>" + NS + "<item>7" + NS + "</options>" + NS +
                      "<invoke name=\"get_weather\">" + Tag("city", "C") + NS + "</invoke>\n"));
    REQUIRE(r.calls.size() == 2);
    CHECK(Json::parse(r.calls[0].arguments) ==
          Json::parse(R"({"options": {"lang": "it", "hours": [7]}})"));
    CHECK(r.calls[1].arguments == R"({"city":"C"})");
  }
  {
    const std::string cut = NS + "<tool_call>\n" + NS + "<invoke name=\"get_weather\">" +
                            Tag("city", "A") + NS + "<days>4";
    auto r = FeedAll(kTools, cut);
    REQUIRE(r.calls.size() == 1);
    CHECK(r.calls[0].arguments == R"({"city":"A"})");
    CHECK(r.content == NS + "<days>4");
  }
  {
    // The end of output right after an invoke, the block never closed: only its layout is left.
    auto r = FeedAll(kTools, "a " + NS + "<tool_call>\n" + Invoke("get_weather", Tag("city", "D")));
    REQUIRE(r.calls.size() == 1);
    CHECK(r.content == "a ");
  }
  {
    auto r = FeedAll(kTools, "text " + NS + "<tool_call>\n" + NS + "<invo");
    CHECK(r.calls.empty());
    CHECK(r.content == "text \n" + NS + "<invo");  // the block's opening markup is consumed
  }
}

TEST_CASE("M3: namespace tokens that start no block are text; partial tokens are withheld") {
  M3ToolCallParser p;
  auto d = p.Push("a ]<]mini");
  CHECK(d.content == "a ");
  d = p.Push("max[>[b");
  CHECK(d.content == NS + "b");
  d = p.Push(NS + "</tool_call> " + NS);
  CHECK(d.content == NS + "</tool_call> ");
  d = p.Flush();
  CHECK(d.content == NS);
  auto r = FeedAll(Json::array(), "x " + NS + "  \n y <tool_call> z");
  CHECK(r.content == "x " + NS + "  \n y <tool_call> z");
  CHECK(r.calls.empty());
}
