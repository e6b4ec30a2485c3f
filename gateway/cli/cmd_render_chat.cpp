// m3-gateway render-chat: renders a chat template with a request's messages/tools exactly as
// apply_chat_template would, and prints the prompt to stdout with no added newline. The
// template limits (nesting, sizes, loop iterations, work) can be changed from their defaults.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gateway/cli/command.h"
#include "gateway/template/chat_template.h"
#include "gateway/template/json_depth.h"
#include "shared/error.h"

namespace {

std::string ReadFileOrThrow(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw m3::Error(m3::ErrorCode::kNotFound, "cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The variables apply_chat_template passes: every request key, with tools/documents defaulting
// to none and add_generation_prompt to false.
nlohmann::ordered_json ContextFromRequest(const nlohmann::ordered_json& request) {
  if (!request.is_object()) {
    throw m3::Error(m3::ErrorCode::kInvalidArgument, "the request must be a JSON object");
  }
  if (!request.contains("messages") || !request["messages"].is_array()) {
    throw m3::Error(m3::ErrorCode::kInvalidArgument, "the request needs a \"messages\" array");
  }
  nlohmann::ordered_json ctx = request;
  if (!ctx.contains("tools")) ctx["tools"] = nullptr;
  if (!ctx.contains("documents")) ctx["documents"] = nullptr;
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = false;
  return ctx;
}

int Run(int argc, char** argv) {
  CLI::App app{"Render a chat template for a request (messages, tools, add_generation_prompt)",
               "render-chat"};
  std::string template_path, request_path;
  app.add_option("--template", template_path, "chat template (.jinja), or a model directory")
      ->required();
  app.add_option("--request", request_path, "request JSON with messages, tools, ...")->required();
  m3::tmpl::TemplateLimits limits;
  app.add_option("--template-max-nesting", limits.max_nesting,
                 "deepest nesting of template blocks/expressions and of request values")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--template-max-output-bytes", limits.max_output_bytes,
                 "largest rendered prompt (and any rendered block)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--template-max-string-bytes", limits.max_string_bytes,
                 "largest string a template may build")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--template-max-list-items", limits.max_list_items,
                 "largest list or dict a template may build")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--template-max-loop-iterations", limits.max_loop_iterations,
                 "for-loop iterations over the whole render")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--template-max-steps", limits.max_steps,
                 "work budget of one render (expression nodes, items walked, bytes built / 64)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::string source = std::filesystem::is_directory(template_path)
                           ? m3::tmpl::LoadChatTemplateSource(template_path)
                           : ReadFileOrThrow(template_path);
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(ReadFileOrThrow(request_path));
  } catch (const nlohmann::json::exception& e) {
    throw m3::Error(m3::ErrorCode::kInvalidArgument, request_path + ": " + e.what());
  }
  // Checked before the request is copied: nlohmann copies recursively. The top-level object
  // adds one level to what the template sees.
  if (m3::tmpl::JsonNestsDeeperThan(request, limits.max_nesting + 1)) {
    throw m3::Error(m3::ErrorCode::kTooLarge, request_path + ": request JSON nested deeper than " +
                                                  std::to_string(limits.max_nesting));
  }
  nlohmann::ordered_json context = ContextFromRequest(request);
  auto tmpl = m3::tmpl::ChatTemplate::Parse(
      source, std::filesystem::path(template_path).filename().string(), limits);
  std::string prompt = tmpl.Render(context);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

const m3::cli::CommandRegistrar kRegistrar({"render-chat", "render a chat template for a request",
                                            Run});

}  // namespace
