// m3-bench-tokenizer: single-thread encode throughput of m3::tok::Tokenizer.
// Builds a deterministic mixed-language text (the corpus strings, shuffled and repeated, grouped
// into documents) or reads one, encodes document by document several times and prints JSON
// with the median MB/s. --write-docs saves the documents as a JSON list so another tokenizer
// (the Python `tokenizers` library) can be timed on exactly the same input.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gateway/tokenizer/tokenizer.h"
#include "shared/error.h"

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw m3::Error(m3::ErrorCode::kNotFound, "cannot open '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Documents of ~`doc_strings` corpus strings each, in a fixed pseudo-random order, until the
// total reaches `target_bytes`.
std::vector<std::string> MakeDocuments(const std::vector<std::string>& corpus, size_t target_bytes,
                                       size_t doc_strings) {
  std::vector<std::string> docs;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  size_t total = 0;
  while (total < target_bytes) {
    std::string doc;
    for (size_t k = 0; k < doc_strings; ++k) {
      if (k > 0) doc += (next() % 4 == 0) ? "\n\n" : " ";
      doc += corpus[next() % corpus.size()];
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path = "tests/data/tokenizer/tokenizer.json";
  std::string corpus_path = "tests/data/tokenizer/corpus.json";
  std::string text_file, write_docs;
  double megabytes = 4.0;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer")
      tokenizer_path = value();
    else if (a == "--corpus")
      corpus_path = value();
    else if (a == "--text-file")
      text_file = value();
    else if (a == "--mb")
      megabytes = std::stod(value());
    else if (a == "--runs")
      runs = std::max(1, std::stoi(value()));
    else if (a == "--write-docs")
      write_docs = value();
    else {
      std::fprintf(stderr,
                   "usage: m3-bench-tokenizer [--tokenizer tokenizer.json] [--corpus corpus.json | "
                   "--text-file F] [--mb 4] [--runs 5] [--write-docs docs.json]\n");
      return 2;
    }
  }
  try {
    const auto load_start = std::chrono::steady_clock::now();
    const auto tok = m3::tok::Tokenizer::FromFile(tokenizer_path);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    std::vector<std::string> docs;
    if (!text_file.empty()) {
      docs.push_back(ReadAll(text_file));
    } else {
      const auto corpus =
          nlohmann::json::parse(ReadAll(corpus_path)).get<std::vector<std::string>>();
      if (corpus.empty()) throw m3::Error(m3::ErrorCode::kInvalidArgument, "empty corpus");
      docs = MakeDocuments(corpus, static_cast<size_t>(megabytes * 1e6), 40);
    }
    if (!write_docs.empty()) {
      std::ofstream out(write_docs, std::ios::binary);
      out << nlohmann::json(docs).dump();
    }
    size_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();
    auto cpu_now = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    };
    std::vector<double> rates, cpu_rates;
    size_t tokens = 0;
    uint64_t checksum = 0;
    for (int r = 0; r < runs; ++r) {
      tokens = 0;
      checksum = 0;
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_now();
      for (const auto& d : docs) {
        const auto ids = tok.Encode(d);
        tokens += ids.size();
        for (int32_t id : ids) checksum = checksum * 31 + static_cast<uint32_t>(id);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rates.push_back(static_cast<double>(bytes) / 1e6 / s);
      cpu_rates.push_back(static_cast<double>(bytes) / 1e6 / (cpu_now() - c0));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    nlohmann::json result = {{"tokenizer", tokenizer_path},
                             {"documents", docs.size()},
                             {"bytes", bytes},
                             {"tokens", tokens},
                             {"ids_checksum", checksum},
                             {"load_s", load_s},
                             {"runs_mb_per_s", rates},
                             {"median_mb_per_s", median(rates)},
                             // CPU time of this thread: steadier than wall time on a busy host.
                             {"median_cpu_mb_per_s", median(cpu_rates)}};
    std::printf("%s\n", result.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "m3-bench-tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
