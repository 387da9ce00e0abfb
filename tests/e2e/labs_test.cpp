// Every lab in resources/labs graded three ways by `mlstudio grade`, as a teacher would:
// the lab itself (its reference solutions) passes every goal, hidden ones too; the student's
// copy from `mlstudio lab pack` fails, each unmet goal with a message saying what it found;
// a copy with its locked setup cell edited is reported as tampered. `mlstudio lab check` on
// the student's copy names each visible goal it fails, and no hidden one.
#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;
using nlohmann::json;

namespace {

std::vector<fs::path> labs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(MLS_SOURCE_DIR) / "resources" / "labs"))
    if (e.path().extension() == ".mls") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE(
    "labs: each reference passes every goal, the student's copy fails each by name, an "
    "edited locked cell is reported",
    "[grade][labs]") {
  const std::vector<fs::path> all = labs();
  // Computational graphs, tensors, data pipelines and deployment at least; every lab added
  // later is graded the same way.
  REQUIRE(all.size() >= 4);
  // Whether Vulkan opens on this machine, as `mlstudio devices` says.
  const Output devices = run("devices");
  REQUIRE(devices.code == 0);
  const size_t vk = devices.out.find("\nvulkan ");
  const std::string vk_line =
      vk == std::string::npos ? ""
                              : devices.out.substr(vk + 1, devices.out.find('\n', vk + 1) - vk - 1);
  const bool vulkan = !vk_line.empty() && vk_line.find("(unavailable)") == std::string::npos;
  INFO(vk_line);
  for (const fs::path& lab : all) {
    const std::string name = lab.stem().string();
    INFO("lab " << name);
    const fs::path dir = temp_dir() / ("labs-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir / "ref");
    fs::create_directories(dir / "student");
    fs::create_directories(dir / "tampered");
    const json doc = json::parse(read_file(lab.string()));
    REQUIRE(doc.contains("lab"));
    const json& goals = doc["lab"]["goals"];
    size_t hidden = 0;
    for (const auto& g : goals) hidden += g.value("hidden", false);
    CHECK(hidden >= 1);  // every lab keeps one check from the students

    // Each submission in a folder of its own, named after the student.
    const std::string ref = (dir / "ref" / "ref.mls").string();
    fs::copy_file(lab, ref);
    const std::string student = (dir / "student" / "student.mls").string();
    Output pack = run("lab pack " + lab.string() + " -o " + student);
    INFO(pack.err);
    REQUIRE(pack.code == 0);
    // A student's edit of a locked cell, in the student's copy: the first locked Lua cell
    // (setup code), else the first locked one of any kind. (Not in the reference: graded, that
    // copy ran every solution again, a third of this test's time in the labs that train.)
    json edited = json::parse(read_file(student));
    std::string locked_id;
    for (const bool lua_only : {true, false}) {
      for (auto& c : edited["notebook"]["cells"])
        if (locked_id.empty() && c.value("role", "") == "locked" &&
            (!lua_only || c.value("kind", "") == "lua")) {
          c["source"].push_back("-- a student's line");
          locked_id = c["id"];
        }
    }
    REQUIRE_FALSE(locked_id.empty());
    const std::string tampered = (dir / "tampered" / "tampered.mls").string();
    std::ofstream(tampered) << edited.dump(2);

    Output o = run(
        "grade -q " + lab.string() + " " + ref + " " + student + " " + tampered + " --json", 300);
    INFO(o.err);
    REQUIRE(o.code == 0);
    const json r = json::parse(last_line(o.out));
    REQUIRE(r["students"].size() == 3);
    std::map<std::string, json> by;
    for (const auto& s : r["students"]) by[s["student"]] = s;

    const json& rs = by["ref"];
    CHECK(rs["status"] == "graded");
    CHECK(rs["tampered"].empty());
    REQUIRE(rs["goals"].size() == goals.size());
    for (const auto& g : rs["goals"]) {
      INFO("reference, goal " << g["goal"] << ": " << g["message"]);
      // A goal that needs Vulkan says so where Vulkan does not open (a build without it, a
      // machine without a driver); where it opens, the goal must pass.
      if (!vulkan && g["passed"] != true &&
          g["message"].get<std::string>().rfind("this goal needs Vulkan", 0) == 0) {
        WARN(name << ": " << g["goal"] << " not graded here: " << g["message"]);
        continue;
      }
      CHECK(g["passed"] == true);
    }

    // The student's copy: each unmet goal with what the check found. The starters of these
    // four labs meet none (a later lab's starter may meet some, but not all).
    const bool meets_none = name == "computational-graphs" || name == "tensors-shapes-strides" ||
                            name == "data-pipelines" || name == "deployment-onnx-int8" ||
                            name == "autodiff-forward-reverse" || name == "static-vs-dynamic" ||
                            name == "memory-checkpointing" || name == "devices-placement";
    const json& ss = by["student"];
    CHECK(ss["status"] == "graded");
    CHECK(ss["tampered"].empty());
    REQUIRE(ss["goals"].size() == goals.size());
    size_t met = 0;
    for (size_t i = 0; i < goals.size(); ++i) {
      const json& g = ss["goals"][i];
      INFO("student, goal " << g["goal"] << ": " << g["message"]);
      CHECK(g["goal"] == goals[i]["id"]);
      if (g["passed"] == true) {
        ++met;
        CHECK_FALSE(meets_none);
      } else {
        CHECK_FALSE(g["message"].get<std::string>().empty());
      }
    }
    CHECK(met < goals.size());

    const json& ts = by["tampered"];
    REQUIRE(ts["tampered"].size() == 1);
    CHECK(ts["tampered"][0] == "locked cell '" + locked_id + "' was edited");

    // "Check my work" on the student's copy: each visible goal named as failed, none hidden.
    Output c = run("lab check " + student, 120);
    INFO(c.out << c.err);
    CHECK(c.code == 0);
    size_t visible = 0;
    for (const auto& g : goals) {
      const std::string id = g["id"];
      if (g.value("hidden", false)) {
        CHECK(c.out.find(id + ":") == std::string::npos);
      } else {
        ++visible;
        if (meets_none) CHECK(c.out.find("FAIL " + id + ":") != std::string::npos);
      }
    }
    if (meets_none)
      CHECK(c.out.find("0 of " + std::to_string(visible) + " goals met") != std::string::npos);
    WARN(name << ": reference " << rs["seconds"] << " s, student " << ss["seconds"] << " s");
  }
}
