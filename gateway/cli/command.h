// The m3-gateway subcommand table. Each cmd_*.cpp defines one subcommand and registers it
// with a static CommandRegistrar, so adding a subcommand never edits main.cpp.
#pragma once

#include <string_view>
#include <vector>

namespace m3::cli {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

std::vector<Command>& Commands();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { Commands().push_back(c); }
};

}  // namespace m3::cli
