// Safetensors parsing (validated header over an mmap) and serialization.
#include "shared/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace m3 {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own sanity bound

std::string Quote(const std::string& s) {
  return "'" + s + "'";
}

}  // namespace

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  Require(fd >= 0, ErrorCode::kNotFound,
          "cannot open safetensors file " + Quote(path) + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, Quote(path) + " is not a regular file");
  }
  SafetensorsFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw Error(ErrorCode::kInternal,
                  "mmap of " + Quote(path) + " failed: " + std::strerror(errno));
    }
    f.mapping_ = m;
    f.base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  f.ParseHeader();
  return f;
}

SafetensorsFile SafetensorsFile::FromBytes(std::string bytes, std::string label) {
  SafetensorsFile f;
  f.path_ = std::move(label);
  f.owned_ = std::move(bytes);
  f.base_ = reinterpret_cast<const uint8_t*>(f.owned_.data());
  f.size_ = f.owned_.size();
  f.ParseHeader();
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept {
  *this = std::move(o);
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this == &o) return *this;
  if (mapping_) ::munmap(mapping_, size_);
  path_ = std::move(o.path_);
  mapping_ = std::exchange(o.mapping_, nullptr);
  size_ = std::exchange(o.size_, 0);
  // A moved std::string may keep small buffers inline, so views are rebased onto the new owner.
  const uint8_t* old_base = std::exchange(o.base_, nullptr);
  owned_ = std::move(o.owned_);
  base_ = mapping_ ? old_base : reinterpret_cast<const uint8_t*>(owned_.data());
  tensors_ = std::move(o.tensors_);
  for (auto& [name, view] : tensors_) view.data = base_ + (view.data - old_base);
  metadata_ = std::move(o.metadata_);
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

void SafetensorsFile::ParseHeader() {
  const std::string where = "safetensors file " + Quote(path_);
  Require(size_ >= 8, ErrorCode::kDataLoss,
          where + " is truncated: " + std::to_string(size_) +
              " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | base_[i];
  Require(header_len <= kMaxHeaderBytes, ErrorCode::kDataLoss,
          where + " declares a header of " + std::to_string(header_len) + " bytes (corrupt?)");
  Require(8 + header_len <= size_, ErrorCode::kDataLoss,
          where + " is truncated: header of " + std::to_string(header_len) +
              " bytes runs past the end of the file (" + std::to_string(size_) + " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(base_ + 8, base_ + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kDataLoss, where + " has a malformed JSON header: " + e.what());
  }
  Require(header.is_object(), ErrorCode::kDataLoss, where + ": header is not a JSON object");
  const uint8_t* data = base_ + 8 + header_len;
  const size_t data_size = size_ - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& e = it.value();
    if (name == "__metadata__") {
      if (e.is_object()) {
        for (auto m = e.begin(); m != e.end(); ++m)
          if (m.value().is_string()) metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = where + ", tensor " + Quote(name);
    Require(e.is_object() && e.contains("dtype") && e.contains("shape") &&
                e.contains("data_offsets") && e["dtype"].is_string() && e["shape"].is_array() &&
                e["data_offsets"].is_array() && e["data_offsets"].size() == 2,
            ErrorCode::kDataLoss, what + ": entry needs dtype, shape and data_offsets[2]");
    auto dtype = ParseDType(e["dtype"].get<std::string>());
    Require(dtype.has_value(), ErrorCode::kUnsupported,
            what + ": unsupported dtype " + e["dtype"].dump());
    TensorView v;
    v.dtype = *dtype;
    // The byte count, not only the element count, stays below 2^62: a shape whose bytes wrap
    // around 2^64 would otherwise match empty data_offsets.
    const uint64_t elem_bytes = DTypeSize(v.dtype);
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      Require(d.is_number_integer() && d.get<int64_t>() >= 0, ErrorCode::kDataLoss,
              what + ": bad shape " + e["shape"].dump());
      v.shape.push_back(d.get<int64_t>());
      uint64_t dim = static_cast<uint64_t>(v.shape.back());
      Require(dim == 0 || numel <= (uint64_t{1} << 62) / elem_bytes / dim, ErrorCode::kDataLoss,
              what + ": shape " + e["shape"].dump() + " overflows");
      numel *= dim;
    }
    const auto& off = e["data_offsets"];
    Require(off[0].is_number_unsigned() && off[1].is_number_unsigned(), ErrorCode::kDataLoss,
            what + ": bad data_offsets " + off.dump());
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    Require(begin <= end && end <= data_size, ErrorCode::kDataLoss,
            what + ": data_offsets " + off.dump() + " run past the end of the data (" +
                std::to_string(data_size) + " bytes; truncated file?)");
    Require(end - begin == numel * elem_bytes, ErrorCode::kDataLoss,
            what + ": " + std::to_string(end - begin) + " bytes of data for shape " +
                ShapeString(v.shape) + " of " + std::string(DTypeName(v.dtype)) + " (expected " +
                std::to_string(numel * elem_bytes) + ")");
    v.data = data + begin;
    v.nbytes = end - begin;
    if (end > begin) ranges.emplace_back(begin, end);
    tensors_[name] = std::move(v);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    Require(ranges[i].first >= ranges[i - 1].second, ErrorCode::kDataLoss,
            where + ": tensors overlap at byte " + std::to_string(ranges[i].first));
  }
}

std::optional<TensorView> SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second;
}

TensorView SafetensorsFile::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  Require(it != tensors_.end(), ErrorCode::kNotFound,
          "tensor " + Quote(name) + " not found in " + Quote(path_));
  return it->second;
}

std::vector<std::string> SafetensorsFile::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, v] : tensors_) names.push_back(name);
  return names;
}

WeightStore WeightStore::OpenDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  WeightStore store;
  store.dir_ = dir;
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorCode::kDataLoss, "malformed " + index.string() + ": " + e.what());
    }
    Require(j.contains("weight_map") && j["weight_map"].is_object(), ErrorCode::kDataLoss,
            index.string() + " has no weight_map object");
    std::map<std::string, const SafetensorsFile*> by_shard;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      Require(it.value().is_string(), ErrorCode::kDataLoss,
              index.string() + ": weight_map entry " + Quote(it.key()) + " is not a file name");
      std::string shard = it.value().get<std::string>();
      Require(shard.find('/') == std::string::npos && shard.find("..") == std::string::npos,
              ErrorCode::kDataLoss,
              index.string() + ": shard name " + Quote(shard) + " is not a plain file name");
      auto found = by_shard.find(shard);
      if (found == by_shard.end()) {
        store.files_.push_back(std::make_unique<SafetensorsFile>(
            SafetensorsFile::Open((fs::path(dir) / shard).string())));
        found = by_shard.emplace(shard, store.files_.back().get()).first;
      }
      Require(found->second->Has(it.key()), ErrorCode::kDataLoss,
              index.string() + " maps " + Quote(it.key()) + " to " + Quote(shard) +
                  ", which does not contain it");
      store.where_[it.key()] = found->second;
    }
  } else if (fs::exists(single)) {
    store.files_.push_back(
        std::make_unique<SafetensorsFile>(SafetensorsFile::Open(single.string())));
    for (const auto& name : store.files_.back()->Names())
      store.where_[name] = store.files_.back().get();
  } else {
    throw Error(ErrorCode::kNotFound,
                "no model.safetensors or model.safetensors.index.json in " + Quote(dir));
  }
  return store;
}

bool WeightStore::Has(const std::string& name) const {
  return where_.count(name) != 0;
}

std::optional<TensorView> WeightStore::Find(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return std::nullopt;
  return it->second->Get(name);
}

TensorView WeightStore::Get(const std::string& name) const {
  auto it = where_.find(name);
  Require(it != where_.end(), ErrorCode::kNotFound,
          "weight " + Quote(name) + " is missing from the checkpoint in " + Quote(dir_));
  return it->second->Get(name);
}

std::vector<std::string> WeightStore::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : where_) names.push_back(name);
  return names;
}

std::string SerializeSafetensors(const NamedTensors& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", std::string(DTypeName(t.dtype()))},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, t] : tensors)
    out.append(reinterpret_cast<const char*>(t.data()), t.nbytes());
  return out;
}

void WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::string bytes = SerializeSafetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  Require(out.good(), ErrorCode::kInvalidArgument, "cannot write " + Quote(path));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  Require(out.good(), ErrorCode::kInternal, "writing " + Quote(path) + " failed");
}

}  // namespace m3
