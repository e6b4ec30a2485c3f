// The released MiniMax-M3 chat template (tests/data/m3-chat/model/chat_template.jinja, the
// model's file verbatim) renders byte-identically to Python jinja2 with transformers' tojson
// over template_cases.json (scripts/golden/make_m3_chat_goldens.py): every thinking mode, root /
// developer / system roles, tools, tool calls with nested objects, arrays, booleans, numbers and
// omitted nulls, tool results with images, multi-turn reasoning. Where Python raised, C++ must
// raise too.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "tests/template/reference.h"
#include "tests/test_util.h"

namespace {

std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n  c++:    [" + a.substr(from, 120) + "]\n  python: [" +
         b.substr(from, 120) + "]";
}

}  // namespace

TEST_CASE("the M3 template renders byte-identically to jinja2 over the M3 suite") {
  const std::string source =
      m3::test::ReadFile(m3::test::DataPath("m3-chat/model/chat_template.jinja"));
  CHECK(source.size() == 11756);  // the released file
  const auto tmpl = m3::tmpl::ChatTemplate::Parse(source, "MiniMax-M3.jinja");
  const auto cases = nlohmann::ordered_json::parse(
      m3::test::ReadFile(m3::test::DataPath("m3-chat/template_cases.json")));
  REQUIRE(cases.size() >= 25);
  int equal = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    CAPTURE(name);
    std::string got, error;
    bool ok = true;
    try {
      got = tmpl.Render(m3::test::ContextFromRequest(c["request"]));
    } catch (const m3::Error& e) {
      ok = false;
      error = e.what();
    }
    if (c["ok"].get<bool>()) {
      CAPTURE(error);
      REQUIRE_MESSAGE(ok, "C++ failed where Python rendered");
      const std::string want = c["rendered"];
      if (got != want) FAIL_CHECK(FirstDifference(got, want));
      equal += got == want;
    } else {
      CHECK_MESSAGE(!ok, "C++ rendered where Python raised");
    }
  }
  CHECK(equal >= 25);
}
