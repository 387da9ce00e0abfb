// The filter language: each operator, precedence, quoting, params' number-or-text rule, and
// errors that point at their column. Results are checked against a hand count over the
// fixture's 40 runs (tests/store/run_db_fixture.h).
#include <catch2/catch.hpp>

#include "store/run_filter.h"
#include "store/run_table.h"

#include "tests/store/run_db_fixture.h"

using namespace mls::store;
using namespace mls::store::test;

namespace {

std::string where_error(const std::string& where) {
  SqlBinds b;
  auto r = filter_sql(where, b);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

int64_t count_where(RunTable& t, const std::string& where) {
  RunQuery q;
  q.where = where;
  auto n = t.count(q);
  INFO(where << ": " << (n ? "" : n.error().message));
  REQUIRE(n.ok());
  return *n;
}

}  // namespace

TEST_CASE("run filter: a bad expression names its column and puts a caret under it",
          "[store][filter]") {
  CHECK(where_error("params.lr < ") ==
        "--where: column 13: expected a value after '<'\n  params.lr < \n" + std::string(14, ' ') +
            "^");
  CHECK(where_error("status = finished")
            .find("column 10: expected a value after '=' (text is "
                  "quoted: 'finished')") != std::string::npos);
  CHECK(where_error("stauts = 'finished'") ==
        "--where: column 1: unknown field 'stauts' (did you mean status?); fields: attributes "
        "(id, name, status, ...), params.KEY, metrics.KEY[.AGG], tags.KEY\n"
        "  stauts = 'finished'\n  ^");
  CHECK(where_error("(status = 'failed'")
            .find("column 19: expected ')' to close the '(' at "
                  "column 1") != std::string::npos);
  CHECK(where_error("status = 'failed')").find("column 18: ')' without a matching '('") !=
        std::string::npos);
  CHECK(where_error("name = 'abc").find("column 8: unterminated text: no closing '") !=
        std::string::npos);
  CHECK(where_error("id = 3 AND")
            .find("column 11: expected a field, '(' or NOT after 'AND', "
                  "found the end") != std::string::npos);
  CHECK(where_error("id = 3 seed = 4")
            .find("column 8: expected AND, OR or the end, found "
                  "'seed'") != std::string::npos);
  CHECK(where_error("id 3").find("column 4: expected an operator") != std::string::npos);
  CHECK(where_error("id = 'x'").find("column 6: 'id' is a number") != std::string::npos);
  CHECK(where_error("metrics.val/loss.best > 'a'").find("column 25: ") != std::string::npos);
  CHECK(where_error("status = 'finised'")
            .find("column 10: unknown status 'finised' (did you mean finished?)") !=
        std::string::npos);
  CHECK(where_error("metrics.val/loss.bets < 1")
            .find("column 1: unknown aggregate 'bets' of metrics.val/loss (did you mean best?)") !=
        std::string::npos);
  CHECK(where_error("id # 3").find("column 4: unexpected character '#'") != std::string::npos);
  CHECK(where_error("id = 1e5x").find("column 6: '1e5x' is not a number") != std::string::npos);
  CHECK(where_error("params < 3").find("column 1: params needs a key") != std::string::npos);
  // A line break in the text does not break the caret's line.
  CHECK(
      where_error("id = 1 AND\nid <").find("\n  id = 1 AND id <\n" + std::string(17, ' ') + "^") !=
      std::string::npos);
}

TEST_CASE("run filter: user text is bound, never spliced into the SQL", "[store][filter]") {
  SqlBinds b;
  auto sql = filter_sql("name = \"x' OR 1=1 --\" AND params.`a'b` = 3", b);
  REQUIRE(sql.ok());
  CHECK(sql->find("OR 1=1") == std::string::npos);
  CHECK(sql->find("a'b") == std::string::npos);
  REQUIRE(b.values.size() == 3);
  CHECK(std::get<std::string>(b.values[0]) == "x' OR 1=1 --");
  CHECK(std::get<std::string>(b.values[1]) == "a'b");
  CHECK(std::get<double>(b.values[2]) == 3.0);
  // A failed parse leaves the binds as they were.
  REQUIRE_FALSE(filter_sql("id = 3 AND name <", b).ok());
  CHECK(b.values.size() == 3);
}

TEST_CASE("run filter: fields parse with keys, quotes and aggregates", "[store][filter]") {
  auto f = parse_field("metrics.val/loss.best");
  REQUIRE(f.ok());
  CHECK(f->kind == Field::Kind::Metric);
  CHECK(f->name == "val/loss");
  CHECK(f->agg == "best");
  f = parse_field("metrics.train/loss");
  REQUIRE(f.ok());
  CHECK(f->agg == "latest");
  f = parse_field("metrics.`a.b`.last");
  REQUIRE(f.ok());
  CHECK(f->name == "a.b");
  CHECK(f->agg == "latest");
  f = parse_field("metrics.\"a b\"");
  REQUIRE(f.ok());
  CHECK(f->name == "a b");
  CHECK(f->label() == "metrics.`a b`");
  f = parse_field("params.model.hidden");  // a dotted param key
  REQUIRE(f.ok());
  CHECK(f->kind == Field::Kind::Param);
  CHECK(f->name == "model.hidden");
  f = parse_field("STATUS");
  REQUIRE(f.ok());
  CHECK(f->name == "status");
  CHECK(parse_field("tags.keep")->kind == Field::Kind::Tag);
  CHECK(error_of(parse_field("stauts")).find("did you mean status?") != std::string::npos);
  CHECK(error_of(parse_field("param.lr")).find("did you mean params.lr?") != std::string::npos);
  CHECK(error_of(parse_field("id = 3")).find("is not a field") != std::string::npos);
}

TEST_CASE("run filter: each operator, precedence and quoting against a hand count",
          "[store][filter]") {
  TempDir dir;
  std::string path = make_runs_db(dir);
  auto t = RunTable::open(path);
  REQUIRE(t.ok());
  RunTable& tab = **t;
  auto lr = [](auto pred) {
    return count_runs([&](const FixtureRun& r) { return r.lr_num && pred(*r.lr_num); });
  };
  CHECK(count_where(tab, "") == kFixtureRuns);
  CHECK(count_where(tab, "params.lr < 0.01") == lr([](double v) { return v < 0.01; }));
  CHECK(count_where(tab, "params.lr <= 0.01") == lr([](double v) { return v <= 0.01; }));
  CHECK(count_where(tab, "params.lr > 0.01") == lr([](double v) { return v > 0.01; }));
  CHECK(count_where(tab, "params.lr >= 0.01") == lr([](double v) { return v >= 0.01; }));
  CHECK(count_where(tab, "params.lr = 0.0001") == lr([](double v) { return v == 1e-4; }));
  CHECK(count_where(tab, "params.lr == 1e-4") == 10);
  // != over numbers: a text value ("auto") never matches a number.
  CHECK(count_where(tab, "params.lr != 0.1") == lr([](double v) { return v != 0.1; }));
  CHECK(count_where(tab, "params.lr <> 0.1") == 29);
  // ... and as text it does.
  CHECK(count_where(tab, "params.lr = 'auto'") == 1);
  CHECK(count_where(tab, "params.lr = \"1e-4\"") == 10);
  CHECK(count_where(tab, "params.lr = '0.0001'") == 0);  // text: as logged
  CHECK(count_where(tab, "params.optimizer LIKE 'AD%'") ==
        count_runs([](const FixtureRun& r) { return r.opt == "adam"; }));
  CHECK(count_where(tab, "params.optimizer NOT LIKE 'ad%'") ==
        count_runs([](const FixtureRun& r) { return r.opt == "sgd"; }));
  CHECK(count_where(tab, "name ~ 'run-1?'") == 10);  // run-10 .. run-19
  CHECK(count_where(tab, "name ~ 'run-1*'") == 11);  // and run-1
  // Attributes.
  CHECK(count_where(tab, "status = 'failed'") ==
        count_runs([](const FixtureRun& r) { return r.status == "failed"; }));
  CHECK(count_where(tab, "status = 'running'") == 1);
  CHECK(count_where(tab, "device = 'cuda:0' AND seed >= 20") ==
        count_runs([](const FixtureRun& r) { return r.device == "cuda:0" && r.seed >= 20; }));
  CHECK(count_where(tab, "experiment = 'exp2'") == 10);
  CHECK(count_where(tab, "id > 35") == 5);
  CHECK(count_where(tab, "duration >= 0") == kFixtureRuns);
  // Metrics read the summary.
  CHECK(count_where(tab, "metrics.val/loss.best < 0.5") ==
        count_runs([](const FixtureRun& r) { return r.val_loss_best < 0.5; }));
  CHECK(count_where(tab, "metrics.val/loss > 1.5") ==  // latest
        count_runs([](const FixtureRun& r) { return r.val_loss_latest > 1.5; }));
  CHECK(count_where(tab, "metrics.val/loss.max > 1.5") == 10);
  CHECK(count_where(tab, "metrics.train/loss.count = 10") == kFixtureRuns);
  CHECK(count_where(tab, "metrics.train/loss.step = 10 AND metrics.val/loss.best_step = 3") ==
        count_runs([](const FixtureRun& r) { return r.id % 4 != 1; }));
  CHECK(count_where(tab, "metrics.`test/accuracy`.min >= 0.2") == 20);
  CHECK(count_where(tab, "metrics.nothing") == 0);
  CHECK(count_where(tab, "metrics.test/accuracy") == kFixtureRuns);
  // Tags: alone a test; with a value a comparison.
  CHECK(count_where(tab, "tags.keep") == 8);
  CHECK(count_where(tab, "NOT tags.keep") == 32);
  CHECK(count_where(tab, "tags.group = 'a'") == 20);
  CHECK(count_where(tab, "params.lr") == kFixtureRuns);
  // Booleans compare as 'true'/'false' text with params and 1/0 with numbers.
  CHECK(count_where(tab, "params.lr = true") == 0);
  CHECK(count_where(tab, "world_size = true") == kFixtureRuns);
  // Precedence: NOT binds tighter than AND, AND tighter than OR; parentheses override.
  auto a = [](const FixtureRun& r) { return r.status == "failed"; };
  auto b = [](const FixtureRun& r) { return r.keep; };
  auto c = [](const FixtureRun& r) { return r.device == "cpu"; };
  CHECK(count_where(tab, "status = 'failed' OR tags.keep AND device = 'cpu'") ==
        count_runs([&](const FixtureRun& r) { return a(r) || (b(r) && c(r)); }));
  CHECK(count_where(tab, "(status = 'failed' OR tags.keep) AND device = 'cpu'") ==
        count_runs([&](const FixtureRun& r) { return (a(r) || b(r)) && c(r); }));
  CHECK(count_where(tab, "not status = 'failed' and tags.keep or device = 'cpu'") ==
        count_runs([&](const FixtureRun& r) { return (!a(r) && b(r)) || c(r); }));
  CHECK(count_where(tab, "NOT (status = 'failed' OR device = 'cpu')") ==
        count_runs([&](const FixtureRun& r) { return !(a(r) || c(r)); }));
  CHECK(count_where(tab, "NOT NOT tags.keep") == 8);
  // The two counts differ, so precedence is really tested.
  CHECK(count_runs([&](const FixtureRun& r) { return a(r) || (b(r) && c(r)); }) !=
        count_runs([&](const FixtureRun& r) { return (a(r) || b(r)) && c(r); }));
}

TEST_CASE("run filter: nesting and length are bounded, and the bound's length runs",
          "[store][filter]") {
  std::string deep = std::string(100000, '(') + "id = 1" + std::string(100000, ')');
  CHECK(where_error(deep).find("column 33: nested deeper than 32 (parentheses or NOT)") !=
        std::string::npos);
  std::string nots;
  for (int i = 0; i < 100; ++i) nots += "NOT ";
  CHECK(where_error(nots + "tags.keep").find("column 129: nested deeper than 32") !=
        std::string::npos);
  std::string ok = std::string(32, '(') + "id = 1" + std::string(32, ')');
  std::string many = "id = 0";
  for (int i = 1; i < 256; ++i) many += " OR id = " + std::to_string(i);
  CHECK(where_error(many + " OR id = 999").find("more than 256 comparisons") != std::string::npos);
  // The largest filters the bounds allow still run in SQLite.
  TempDir dir;
  auto t = RunTable::open(make_runs_db(dir));
  REQUIRE(t.ok());
  CHECK(count_where(**t, ok) == 1);
  std::string nots32, not_parens;
  for (int i = 0; i < 32; ++i) nots32 += "NOT ";
  CHECK(count_where(**t, nots32 + "tags.keep") == 8);
  CHECK(count_where(**t, nots32.substr(4) + "tags.keep") == 32);  // 31 NOTs
  for (int i = 0; i < 16; ++i) not_parens += "NOT (id > 0 AND ";
  // NOT (id > 0 AND x) is NOT x here; sixteen of them are x again.
  CHECK(count_where(**t, not_parens + "tags.keep" + std::string(16, ')')) == 8);
  CHECK(count_where(**t, not_parens.substr(16) + "tags.keep" + std::string(15, ')')) == 32);

  CHECK(count_where(**t, many) == kFixtureRuns);
  std::string params = "params.lr = 0.1";
  for (int i = 1; i < 256; ++i) params += " AND params.lr = 0.1";
  CHECK(count_where(**t, params) == 10);
}
