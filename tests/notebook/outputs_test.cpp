#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "scripting/notebook/outputs.h"

using namespace mls::lua;
namespace fs = std::filesystem;

namespace {

fs::path scratch() {
  fs::path d = fs::temp_directory_path() / ("mls-outputs-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

CellOutput sample() {
  CellOutput o;
  o.cell_id = "data";
  o.text = "x = 3\n";
  o.figures.push_back(
      {.svg = "<svg width=\"10\"></svg>", .title = "loss", .width = 10, .height = 20});
  o.widgets.push_back({.kind = "slider",
                       .name = "lr",
                       .label = "learning rate",
                       .min = 0.001,
                       .max = 0.1,
                       .step = 0.001,
                       .value = 0.01});
  o.widgets.push_back(
      {.kind = "select", .name = "act", .options = {"relu", "gelu"}, .value = "gelu"});
  o.ok = false;
  o.error = "cell data:3: attempt to call a nil value";
  o.error_line = 3;
  o.seconds = 0.25;
  o.run_id = 7;
  o.hash = "abc123";
  return o;
}

}  // namespace

TEST_CASE("Saved outputs: a cell's output round-trips through JSON and the outputs file",
          "[notebook][outputs]") {
  const CellOutput o = sample();
  auto back = cell_output_from_json(cell_output_to_json(o), "x");
  REQUIRE(back);
  back->cell_id = "data";
  CHECK(*back == o);

  REQUIRE(outputs_path("lab/tour.mls") == "lab/tour.outputs.json");
  REQUIRE(outputs_path("lab/tour") == "lab/tour.outputs.json");

  const std::string project = (scratch() / "tour.mls").string();
  fs::remove(outputs_path(project));
  auto none = load_outputs(project);
  REQUIRE(none);
  CHECK_FALSE(none->has_value());

  CellOutput other;
  other.cell_id = "plot";
  other.text = "hello\n";
  REQUIRE(save_outputs(project, {{"data", o}, {"plot", other}}));
  auto loaded = load_outputs(project);
  REQUIRE(loaded);
  REQUIRE(loaded->has_value());
  REQUIRE((*loaded)->size() == 2);
  CHECK((*loaded)->at("data") == o);
  CHECK((*loaded)->at("plot") == other);
}

TEST_CASE("Saved outputs: a broken outputs file is refused with its name", "[notebook][outputs]") {
  const std::string project = (scratch() / "broken.mls").string();
  const std::string path = outputs_path(project);
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };

  write("{\"format\": 1, \"cells\": {\"a\": ");  // truncated
  auto r = load_outputs(project);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(path) != std::string::npos);
  CHECK(r.error().message.find("not valid JSON") != std::string::npos);

  write(R"({"format": 2, "cells": {}})");
  r = load_outputs(project);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("/format") != std::string::npos);

  write(R"({"format": 1, "cells": {"a": {"text": 5}}})");
  r = load_outputs(project);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find(path) != std::string::npos);
  CHECK(r.error().message.find("/cells/a/text") != std::string::npos);

  write(R"({"format": 1, "cells": {"a": {"figures": [{"svg": 1}]}}})");
  r = load_outputs(project);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("/cells/a/figures/0/svg") != std::string::npos);
}
