// Shared helpers for the node-type tests: an initialised CPU backend and documents built
// in code.
//
//   Document d = make_doc({{"x", "mls.input"}, {"y", "mls.labels"}, ...}, {{"x:out", "fc:in"}});
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"
#include "nodes/document.h"

namespace mls::nodes::test {

// Initialises the engine (op registry, kernels). Every test case calls it first: ctest runs
// each case in a process of its own.
inline Backend& host() {
  cpu::init();
  return cpu::backend();
}

struct NodeSpec {
  std::string id, type;
  nlohmann::json params = nlohmann::json::object();
};

// Links are "from:port" -> "to:port".
inline Document make_doc(const std::vector<NodeSpec>& nodes,
                         const std::vector<std::pair<std::string, std::string>>& links) {
  Document d;
  d.name = "test";
  for (const NodeSpec& n : nodes) d.nodes.push_back({n.id, n.type, 1, n.params});
  auto split = [](const std::string& s) {
    return std::make_pair(s.substr(0, s.find(':')), s.substr(s.find(':') + 1));
  };
  for (const auto& [from, to] : links) {
    auto [fn, fp] = split(from);
    auto [tn, tp] = split(to);
    d.links.push_back({fn, fp, tn, tp});
  }
  return d;
}

}  // namespace mls::nodes::test
