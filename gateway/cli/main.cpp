// m3-gateway entry point: dispatches to a registered subcommand and turns every error into a
// one-line message on stderr and a non-zero exit status (2 for bad input, 1 otherwise).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "gateway/cli/command.h"
#include "shared/error.h"

namespace m3::cli {

std::vector<Command>& Commands() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace m3::cli

namespace {

void PrintUsage() {
  std::fprintf(stderr, "usage: m3-gateway <command> [options]\n\ncommands:\n");
  auto commands = m3::cli::Commands();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands) {
    std::fprintf(stderr, "  %-14.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(stderr, "\n'm3-gateway <command> --help' describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  for (const auto& c : m3::cli::Commands()) {
    if (c.name != name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const m3::Error& e) {
      std::fprintf(stderr, "m3-gateway %s: error (%.*s): %s\n", name.c_str(),
                   static_cast<int>(m3::ErrorCodeName(e.code()).size()),
                   m3::ErrorCodeName(e.code()).data(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "m3-gateway %s: error: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "m3-gateway: unknown command '%s'\n", name.c_str());
  PrintUsage();
  return 2;
}
