// Runs the Python jinja2 reference (render_reference.py, configured as transformers configures
// it) over a batch of (template file, request) pairs in one process.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace m3::test {

struct ReferenceCase {
  std::string template_path;
  nlohmann::ordered_json request;
};

struct ReferenceResult {
  bool ok = false;
  std::string output;  // the rendered prompt when ok
  std::string error;   // the Python exception when not ok
};

// Throws std::runtime_error when Python or jinja2 cannot be run (the tests then fail: the
// comparison needs the reference).
std::vector<ReferenceResult> RenderWithPython(const std::vector<ReferenceCase>& cases);

// The context apply_chat_template builds from a request (tools/documents default to none,
// add_generation_prompt to false), mirroring render_reference.py and the render-chat CLI.
nlohmann::ordered_json ContextFromRequest(const nlohmann::ordered_json& request);

}  // namespace m3::test
