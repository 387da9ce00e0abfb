// Every lab in resources/labs graded three ways by `mlstudio grade`, as a teacher would:
// the lab itself (its reference solutions) passes every goal, hidden ones too; the student's
// copy from `mlstudio lab pack` fails every goal, each with a message saying what it found;
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
  // The four of helper G's brief at least; others' labs are graded the same way.
  REQUIRE(all.size() >= 4);
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
    json edited = doc;
    bool found_setup = false;
    for (auto& c : edited["notebook"]["cells"])
      if (c["id"] == "setup" && c.value("role", "") == "locked") {
        c["source"].push_back("-- a student's line");
        found_setup = true;
      }
    REQUIRE(found_setup);
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
      CHECK(g["passed"] == true);
    }

    // The student's copy: every goal unmet, each with what the check found.
    const json& ss = by["student"];
    CHECK(ss["status"] == "graded");
    CHECK(ss["tampered"].empty());
    REQUIRE(ss["goals"].size() == goals.size());
    for (size_t i = 0; i < goals.size(); ++i) {
      const json& g = ss["goals"][i];
      INFO("student, goal " << g["goal"] << ": " << g["message"]);
      CHECK(g["goal"] == goals[i]["id"]);
      CHECK(g["passed"] == false);
      CHECK_FALSE(g["message"].get<std::string>().empty());
    }

    const json& ts = by["tampered"];
    REQUIRE(ts["tampered"].size() == 1);
    CHECK(ts["tampered"][0] == "locked cell 'setup' was edited");

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
        CHECK(c.out.find("FAIL " + id + ":") != std::string::npos);
      }
    }
    CHECK(c.out.find("0 of " + std::to_string(visible) + " goals met") != std::string::npos);
    WARN(name << ": reference " << rs["seconds"] << " s, student " << ss["seconds"] << " s");
  }
}
