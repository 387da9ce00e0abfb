// `mlstudio runs ...` on a run database a stranger wrote: escapes, formulas and TeX in run
// names, params, tags, notes and metric keys come out inert in every output format.
#include <catch2/catch.hpp>

#include "store/run_store.h"

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

namespace {

const std::string kEsc = "\x1b";
// OSC 52 (writes the clipboard), a CSI clear screen, a C1 CSI (U+009B) and a BEL.
const std::string kOsc = kEsc + "]52;c;ZXZpbA==" + kEsc + "\\";
const std::string kClear = kEsc + "[2J";
const std::string kC1 =
    "\xc2\x9b"
    "31m\a";

std::string hostile_db() {
  fs::path db = temp_dir() / "hostile_runs.db";
  fs::remove(db);
  auto st = mls::store::RunStore::open(db.string());
  REQUIRE(st.ok());
  auto id = (*st)->begin_run({.name = "=cmd|' /C calc'!A0 " + kOsc + " \\input{/etc/passwd}",
                              .device = "cpu" + kClear,
                              .seed = 1});
  REQUIRE(id.ok());
  REQUIRE((*st)->log_param(*id, "k" + kClear, "=1+1" + kC1).ok());
  REQUIRE((*st)->set_tag(*id, "t" + kClear, "+1\\immediate\\write18{ls}" + kClear).ok());
  REQUIRE((*st)->set_note(*id, "-2+3 " + kC1 + " \\def\\x{}").ok());
  (*st)->log_metric("m" + kClear, 1, 0.5);
  REQUIRE((*st)->end_run(*id, "finished").ok());
  return db.string();
}

// No ESC, BEL or C1 control byte pair anywhere.
bool inert(const std::string& s) {
  if (s.find('\x1b') != std::string::npos || s.find('\a') != std::string::npos) return false;
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9f)
      return false;
  return true;
}

}  // namespace

TEST_CASE("runs: a stranger's escapes, formulas and TeX are inert in every output",
          "[e2e][runs_cli][hostile]") {
  const std::string db = hostile_db();
  const std::string cols = " --columns 'name,device,note,tags.\"t" + kClear + "\",params.\"k" +
                           kClear + "\",metrics.\"m" + kClear + "\"'";
  for (const std::string& args : std::vector<std::string>{
           "runs list", "runs list" + cols, "runs show 1", "runs compare 1 1", "runs export --csv",
           "runs export --csv" + cols, "runs export --latex" + cols, "runs export --json" + cols,
           "runs query 'SELECT * FROM runs, tags, params, metrics'",
           "runs query --csv 'SELECT * FROM runs, tags, params, metrics'",
           "runs query --json 'SELECT * FROM runs, tags, params, metrics'"}) {
    Output o = run(args + " --db " + db, 30);
    INFO(args << "\n" << o.out << o.err);
    CHECK(o.code == 0);
    CHECK(o.out.find("calc") != std::string::npos);
    CHECK(inert(o.out));
    CHECK(inert(o.err));
  }
  // CSV: no field starts a formula; LaTeX: no command of the stranger's survives.
  Output csv = run("runs export --csv" + cols + " --db " + db, 30);
  CHECK(csv.out.find(",=") == std::string::npos);
  CHECK(csv.out.find(",+") == std::string::npos);
  CHECK(csv.out.find(",-") == std::string::npos);
  CHECK(csv.out.find("\n=") == std::string::npos);
  Output tex = run("runs export --latex" + cols + " --db " + db, 30);
  CHECK(tex.out.find("\\input") == std::string::npos);
  CHECK(tex.out.find("\\write18") == std::string::npos);
  CHECK(tex.out.find("\\def") == std::string::npos);
}
