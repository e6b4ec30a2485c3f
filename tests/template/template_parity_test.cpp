// Byte-for-byte parity with Python jinja2 for every real model template in
// tests/data/chat_templates against every conversation in conversations.json. Where Python
// renders, the C++ prompt must be identical; where Python raises, C++ must raise too.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "tests/template/reference.h"
#include "tests/test_util.h"

namespace {

std::vector<std::string> TemplateFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(m3::test::DataPath("chat_templates"))) {
    if (e.path().extension() == ".jinja") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n  c++:    [" + a.substr(from, 120) + "]\n  python: [" +
         b.substr(from, 120) + "]";
}

}  // namespace

TEST_CASE("real chat templates render byte-identically to Python jinja2") {
  auto conversations = nlohmann::ordered_json::parse(
      m3::test::ReadFile(m3::test::DataPath("chat_templates/conversations.json")));
  std::vector<std::string> templates = TemplateFiles();
  REQUIRE(templates.size() >= 6);
  REQUIRE(conversations.size() >= 20);

  std::vector<m3::test::ReferenceCase> cases;
  for (const auto& t : templates) {
    for (const auto& c : conversations) cases.push_back({t, c["request"]});
  }
  auto reference = m3::test::RenderWithPython(cases);

  int equal = 0, raised_both = 0;
  std::map<std::string, int> per_template;
  size_t k = 0;
  for (const auto& t : templates) {
    std::string name = std::filesystem::path(t).filename().string();
    auto tmpl = m3::tmpl::ChatTemplate::Parse(m3::test::ReadFile(t), name);
    for (const auto& c : conversations) {
      const auto& ref = reference[k++];
      CAPTURE(name);
      std::string conv = c["name"].get<std::string>();
      CAPTURE(conv);
      std::string got, error;
      bool ok = true;
      try {
        got = tmpl.Render(m3::test::ContextFromRequest(c["request"]));
      } catch (const m3::Error& e) {
        ok = false;
        error = e.what();
      }
      if (ref.ok) {
        CAPTURE(error);
        REQUIRE_MESSAGE(ok, "C++ failed where Python rendered");
        if (got != ref.output) FAIL_CHECK(FirstDifference(got, ref.output));
        if (got == ref.output) {
          ++equal;
          ++per_template[name];
        }
      } else {
        CAPTURE(ref.error);
        CHECK_MESSAGE(!ok, "C++ rendered where Python raised");
        if (!ok) ++raised_both;
      }
    }
  }
  MESSAGE(equal << " (template, conversation) pairs byte-equal, " << raised_both
                << " raised in both, of " << cases.size());
  for (const auto& [n, count] : per_template) MESSAGE(n << ": " << count << " byte-equal");
}
