// ONNX Runtime from the tests: tools/onnx/ort_compare.js, run by node on the onnxruntime-node
// that scripts/setup installs under build/ort, over a manifest of cases (ONNX file, f32 input
// files and shapes, mlstudio's output and a tolerance). Where ORT is missing the tests say so
// with a WARN and check through the engine alone.
//
//   nlohmann::json cases = nlohmann::json::array();
//   test::write_f32(dir.file("x.f32"), x);  test::write_f32(dir.file("y.f32"), y);
//   cases.push_back(test::ort_case(dir.file("m.onnx"), {{dir.file("x.f32"), {3, 4}}},
//   dir.file("y.f32"), 1e-4)); if (test::ort_available()) {
//     test::OrtRun r = test::run_ort(cases, dir.file("cases.json"));
//     CHECK(r.exit_code == 0);  r.results[0]["max_abs_diff"] ...   // one JSON object per case
//   }
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/shape.h"

namespace mls::test {

inline std::filesystem::path ort_modules() {
  return std::filesystem::path(MLS_BINARY_DIR) / "ort" / "node_modules";
}

inline bool ort_available() {
  return std::filesystem::exists(ort_modules() / "onnxruntime-node");
}

inline void write_f32(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// One case: the model, its f32 inputs (files written by the test, in the model's input order)
// and mlstudio's output; |ORT - mlstudio| / max(1, |mlstudio|) must stay within `tolerance`.
inline nlohmann::json ort_case(const std::string& model,
                               const std::vector<std::pair<std::string, Shape>>& inputs,
                               const std::string& reference, double tolerance) {
  nlohmann::json in = nlohmann::json::array();
  for (const auto& [file, shape] : inputs) in.push_back({{"file", file}, {"shape", shape}});
  return {{"model", model}, {"inputs", in}, {"reference", reference}, {"tolerance", tolerance}};
}

struct OrtRun {
  int exit_code = -1;                   // 0: every case within its tolerance
  std::string output;                   // what ort_compare.js printed
  std::vector<nlohmann::json> results;  // one per case, in order
};

// Writes the manifest to `manifest_path` and runs ort_compare.js over it.
inline OrtRun run_ort(const nlohmann::json& cases, const std::string& manifest_path) {
  std::ofstream(manifest_path) << cases.dump();
  OrtRun r;
  const std::string cmd = "NODE_PATH='" + ort_modules().string() +
                          "' node '" MLS_SOURCE_DIR "/tools/onnx/ort_compare.js' --manifest '" +
                          manifest_path + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) r.results.push_back(std::move(j));
  }
  return r;
}

}  // namespace mls::test
