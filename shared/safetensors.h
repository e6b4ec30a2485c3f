// Safetensors reading and writing.
//  - SafetensorsFile: one .safetensors file, mmapped (or an in-memory buffer), with its header
//    validated up front: dtypes known, shapes non-negative, byte ranges inside the file, sized
//    exactly shape x dtype, and not overlapping. Views point into the mapping; no copies.
//  - WeightStore: a model directory, either one model.safetensors or shards listed by
//    model.safetensors.index.json, each shard mapped once.
//  - SerializeSafetensors / WriteSafetensors: the writer, for preprocessing outputs and tools.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shared/tensor.h"

namespace m3 {

class SafetensorsFile {
 public:
  static SafetensorsFile Open(const std::string& path);                    // mmap
  static SafetensorsFile FromBytes(std::string bytes, std::string label);  // owns the buffer

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  std::optional<TensorView> Find(const std::string& name) const;
  TensorView Get(const std::string& name) const;  // throws kNotFound naming the file
  std::vector<std::string> Names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void ParseHeader();

  std::string path_;
  const uint8_t* base_ = nullptr;  // start of the file bytes
  size_t size_ = 0;
  void* mapping_ = nullptr;  // mmap result when mapped
  std::string owned_;        // the buffer when built from bytes
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

class WeightStore {
 public:
  // dir holds model.safetensors or model.safetensors.index.json + shards.
  static WeightStore OpenDirectory(const std::string& dir);

  bool Has(const std::string& name) const;
  std::optional<TensorView> Find(const std::string& name) const;
  TensorView Get(const std::string& name) const;  // throws kNotFound with the directory
  std::vector<std::string> Names() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

std::string SerializeSafetensors(const NamedTensors& tensors,
                                 const std::map<std::string, std::string>& metadata = {});
void WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace m3
