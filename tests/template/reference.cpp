// Batch driver for the Python jinja2 reference renderer (see reference.h).
#include "tests/template/reference.h"

#include <filesystem>
#include <stdexcept>

#include "tests/test_util.h"

namespace m3::test {

namespace {

std::string PythonPath() {
  // Debian's interpreter carries python3-jinja2; prefer it over any other python3 on PATH.
  if (std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "/bin/python3";
}

}  // namespace

std::vector<ReferenceResult> RenderWithPython(const std::vector<ReferenceCase>& cases) {
  nlohmann::ordered_json manifest = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    manifest.push_back({{"template", c.template_path}, {"request", c.request}});
  }
  std::string dir = TempDir();
  std::string path = dir + "/manifest.json";
  WriteFile(path, manifest.dump());
  ProcessResult r =
      RunProcess({PythonPath(), "tests/template/render_reference.py", "--batch", path});
  std::filesystem::remove_all(dir);
  if (r.exit_code != 0) {
    throw std::runtime_error("render_reference.py failed (" + std::to_string(r.exit_code) +
                             "): " + r.err);
  }
  auto results = nlohmann::json::parse(r.out);
  std::vector<ReferenceResult> out;
  for (const auto& item : results) {
    ReferenceResult rr;
    rr.ok = item.at("ok").get<bool>();
    if (rr.ok) {
      rr.output = item.at("output").get<std::string>();
    } else {
      rr.error = item.at("error").get<std::string>();
    }
    out.push_back(std::move(rr));
  }
  if (out.size() != cases.size()) throw std::runtime_error("reference returned a short batch");
  return out;
}

nlohmann::ordered_json ContextFromRequest(const nlohmann::ordered_json& request) {
  nlohmann::ordered_json ctx = request;
  if (!ctx.contains("tools")) ctx["tools"] = nullptr;
  if (!ctx.contains("documents")) ctx["documents"] = nullptr;
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = false;
  return ctx;
}

}  // namespace m3::test
