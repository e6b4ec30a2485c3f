// Helpers every test uses: paths to test data and binaries, relative L2 error, running a
// subprocess and capturing its output, raw safetensors bytes.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace m3::test {

// tests/data/<relative>, or its copy unpacked into the build tree from a .tar.xz
std::string DataPath(const std::string& relative);
std::string BinPath(const std::string& name);  // <build>/bin/<name>
std::string TempDir();                         // a fresh directory under /tmp

// ||a - b|| / ||b||; infinity when sizes differ.
double RelativeL2(std::span<const float> a, std::span<const float> b);

struct ProcessResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs argv (no shell), with optional stdin text; returns exit code and output.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& stdin_text = "");

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

// A safetensors file from a raw JSON header and data bytes (the 8-byte little-endian header
// length first), for files the writer would never make.
std::string SafetensorsBytes(const std::string& header, const std::string& data);

}  // namespace m3::test
