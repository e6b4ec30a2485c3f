// ToolCallParser: MiniMax XML tool calls, typed by the tool schema, streamed or whole.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/text/tool_call_parser.h"
#include "tests/text/stream_util.h"

using m3::text::ToolCall;
using m3::text::ToolCallParser;
using m3::text::ToolSchema;
using Json = nlohmann::ordered_json;

namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

ToolCallParser MakeParser(const Json& tools = Json::array()) {
  return ToolCallParser(ToolSchema(tools), [](size_t i) { return "call_" + std::to_string(i); });
}

Parsed Feed(const Json& tools, const std::vector<std::string>& chunks) {
  auto p = MakeParser(tools);
  Parsed r;
  for (const auto& c : chunks) {
    auto d = p.Push(c);
    r.content += d.content;
    for (auto& call : d.calls) r.calls.push_back(call);
  }
  auto d = p.Flush();
  r.content += d.content;
  for (auto& call : d.calls) r.calls.push_back(call);
  return r;
}

// Parses whole, char by char and in random chunks; all must agree. Returns the whole result.
Parsed FeedAll(const Json& tools, const std::string& text) {
  auto one = Feed(tools, {text});
  auto check = [&](const Parsed& r) {
    CHECK(r.content == one.content);
    REQUIRE(r.calls.size() == one.calls.size());
    for (size_t i = 0; i < r.calls.size(); ++i) {
      CHECK(r.calls[i].name == one.calls[i].name);
      CHECK(r.calls[i].arguments == one.calls[i].arguments);
      CHECK(r.calls[i].index == i);
    }
  };
  check(Feed(tools, m3::test::CharChunks(text)));
  std::mt19937 rng(3);
  for (int i = 0; i < 20; ++i) check(Feed(tools, m3::test::RandomChunks(text, rng, 8)));
  return one;
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                   "metric": {"type": "boolean"}, "threshold": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "string"}},
                   "opts": {"type": "object"}, "zip": {"type": "string"},
                   "maybe": {"type": ["integer", "null"]}}}}}
])");

}  // namespace

TEST_CASE("a single invoke, exactly as the MiniMax template renders it") {
  std::string text =
      "I'll check.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>";
  auto r = FeedAll(kTools, text);
  CHECK(r.content == "I'll check.\n");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "get_weather");
  CHECK(r.calls[0].id == "call_0");
  CHECK(Json::parse(r.calls[0].arguments) == Json{{"city", "Paris"}});
}

TEST_CASE("several invokes per block and several blocks") {
  std::string text =
      "<minimax:tool_call>\n<invoke name=\"a\">\n<parameter name=\"x\">1</parameter>\n</invoke>\n"
      "<invoke name=\"b\">\n</invoke>\n</minimax:tool_call>\nbetween\n"
      "<minimax:tool_call>\n<invoke name='c'>\n<parameter name=\"s\">multi\nline <b>v</b>"
      "</parameter>\n</invoke>\n</minimax:tool_call>";
  auto r = FeedAll(Json::array(), text);
  CHECK(r.content == "\nbetween\n");
  REQUIRE(r.calls.size() == 3);
  CHECK(r.calls[0].name == "a");
  CHECK(Json::parse(r.calls[0].arguments) == Json{{"x", 1}});  // no schema: JSON-parsed
  CHECK(r.calls[1].name == "b");
  CHECK(r.calls[1].arguments == "{}");
  CHECK(r.calls[2].name == "c");
  CHECK(Json::parse(r.calls[2].arguments) == Json{{"s", "multi\nline <b>v</b>"}});
}

TEST_CASE("parameter values typed by the tool schema") {
  std::string text =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
      "<parameter name=\"city\">123</parameter>\n"
      "<parameter name=\"days\">\n7\n</parameter>\n"
      "<parameter name=\"metric\">True</parameter>\n"
      "<parameter name=\"threshold\">-2.5e1</parameter>\n"
      "<parameter name=\"tags\">[\"a\", \"b\"]</parameter>\n"
      "<parameter name=\"opts\">{\"k\": [1, null]}</parameter>\n"
      "<parameter name=\"zip\">02134</parameter>\n"
      "<parameter name=\"maybe\">null</parameter>\n"
      "<parameter name=\"unknown\">{\"z\": 1}</parameter>\n"
      "</invoke>\n</minimax:tool_call>";
  auto r = FeedAll(kTools, text);
  REQUIRE(r.calls.size() == 1);
  Json args = Json::parse(r.calls[0].arguments);
  CHECK(args["city"] == "123");
  CHECK(args["days"] == 7);
  CHECK(args["days"].is_number_integer());
  CHECK(args["metric"] == true);
  CHECK(args["threshold"] == -25.0);
  CHECK(args["tags"] == Json::array({"a", "b"}));
  CHECK(args["opts"] == Json{{"k", Json::array({1, nullptr})}});
  CHECK(args["zip"] == "02134");
  CHECK(args["maybe"].is_null());
  CHECK(args["unknown"] == Json{{"z", 1}});
  // Order of parameters is kept.
  CHECK(args.begin().key() == "city");
}

TEST_CASE("values that do not fit the declared type fall back to strings") {
  ToolSchema schema(kTools);
  CHECK(schema.Convert("get_weather", "days", "seven") == "seven");
  CHECK(schema.Convert("get_weather", "days", "3.0") == 3);
  CHECK(schema.Convert("get_weather", "metric", "yes") == "yes");
  CHECK(schema.Convert("get_weather", "tags", "[1, 2") == "[1, 2");
  CHECK(schema.Convert("get_weather", "opts", "[1]") == "[1]");
  CHECK(schema.Convert("other_tool", "p", "Paris") == "Paris");
  CHECK(schema.Convert("other_tool", "p", "") == "");
  CHECK(ToolSchema(Json("not a list")).Convert("f", "p", "1.5") == 1.5);
}

TEST_CASE("partial tags are withheld, plain text flows") {
  auto p = MakeParser();
  CHECK(p.Push("Hi <minimax:to").content == "Hi ");
  auto d = p.Push("ol_call>\n<inv");
  CHECK(d.content == "");
  CHECK(d.calls.empty());
  d = p.Push("oke name=\"f\">\n</invoke>");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].name == "f");
  CHECK(p.Push("\n</minimax:tool_call>").content == "");
  CHECK(p.Push(" done <mini").content == " done ");
  CHECK(p.Push("mal").content == "<minimal");
  CHECK(p.Flush().content == "");
}

TEST_CASE("malformed blocks come back as content, never crash") {
  // Garbage inside a block.
  auto r = FeedAll(Json::array(), "a<minimax:tool_call>hello</minimax:tool_call>b");
  CHECK(r.calls.empty());
  CHECK(r.content == "a<minimax:tool_call>hello</minimax:tool_call>b");
  // Invoke without a name.
  r = FeedAll(Json::array(), "<minimax:tool_call>\n<invoke>\n</invoke>\n</minimax:tool_call>");
  CHECK(r.calls.empty());
  CHECK(r.content == "<minimax:tool_call>\n<invoke>\n</invoke>\n</minimax:tool_call>");
  // A good invoke followed by a broken one: the good one stays a call.
  r = FeedAll(Json::array(),
              "<minimax:tool_call>\n<invoke name=\"ok\">\n</invoke>\n<invoke name=\"bad\">\n"
              "junk\n</invoke>\n</minimax:tool_call>");
  REQUIRE(r.calls.size() == 1);
  CHECK(r.calls[0].name == "ok");
  CHECK(r.content == "\n<invoke name=\"bad\">\njunk\n</invoke>\n</minimax:tool_call>");
  // Cut off by the token limit in the middle of a value.
  r = FeedAll(Json::array(), "x<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"p\">va");
  CHECK(r.calls.empty());
  CHECK(r.content == "x<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"p\">va");
  // A missing </invoke> before the block end is tolerated.
  r = FeedAll(Json::array(),
              "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"p\">v</parameter>\n"
              "</minimax:tool_call>");
  REQUIRE(r.calls.size() == 1);
  CHECK(Json::parse(r.calls[0].arguments) == Json{{"p", "v"}});
  // An opening tag that never closes.
  std::string long_tag = "<minimax:tool_call>\n<invoke name=\"" + std::string(3000, 'x');
  r = FeedAll(Json::array(), long_tag);
  CHECK(r.calls.empty());
  CHECK(r.content == long_tag);
}

TEST_CASE("random fragments of the format: streaming equals one-shot, no crash") {
  const std::vector<std::string> pieces = {"<minimax:tool_call>",
                                           "</minimax:tool_call>",
                                           "<invoke name=\"f\">",
                                           "</invoke>",
                                           "<parameter name=\"p\">",
                                           "</parameter>",
                                           "\n",
                                           "x",
                                           "<",
                                           ">",
                                           "\"",
                                           "{\"a\":1}",
                                           "<invoke",
                                           "<parameter",
                                           "name=",
                                           "é",
                                           "</",
                                           "<minimax:tool_call"};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1), len(1, 30);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    for (size_t n = len(rng); n > 0; --n) text += pieces[pick(rng)];
    CHECK_NOTHROW(FeedAll(Json::array(), text));
  }
}

TEST_CASE("default ids are unique call_ ids") {
  ToolCallParser p;
  auto d = p.Push(
      "<minimax:tool_call><invoke name=\"a\"></invoke><invoke name=\"a\"></invoke>"
      "</minimax:tool_call>");
  REQUIRE(d.calls.size() == 2);
  CHECK(d.calls[0].id.starts_with("call_"));
  CHECK(d.calls[0].id != d.calls[1].id);
}
