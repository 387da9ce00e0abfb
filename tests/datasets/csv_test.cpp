#include <catch2/catch.hpp>
#include <cmath>

#include "datasets/csv_dataset.h"
#include "tests/datasets/fixtures.h"
#include "tests/datasets/formats.h"

using Catch::Matchers::Contains;
using mls::TargetKind;
using namespace mls::data;
using namespace mls::data::test;

namespace {

SplitPlan no_split() {
  return SplitPlan{};
}

CsvOptions target(const std::string& t) {
  CsvOptions o;
  o.target = {t};
  return o;
}

}  // namespace

TEST_CASE("CSV text is split into cells with RFC 4180 quoting", "[csv]") {
  auto t = parse_csv(
      "name,note,n\r\n\"Smith, J\",\"said \"\"hi\"\"\",1\n\nplain,\"two\nlines\",2\n", "q.csv");
  INFO((t ? std::string() : t.error().message));
  REQUIRE(t.ok());
  CHECK(t->header == std::vector<std::string>{"name", "note", "n"});
  REQUIRE(t->rows.size() == 2);
  CHECK(t->rows[0] == std::vector<std::string>{"Smith, J", "said \"hi\"", "1"});
  CHECK(t->rows[1] == std::vector<std::string>{"plain", "two\nlines", "2"});
  CHECK(t->lines == std::vector<int64_t>{2, 4});  // the blank line 3 is skipped
}

TEST_CASE("CSV structure errors name the file and line", "[csv]") {
  CHECK(error_of(parse_csv("a,b\n1,2\n3\n", "d.csv")) == "d.csv:3: expected 2 fields, found 1");
  CHECK(error_of(parse_csv("a,a\n", "d.csv")) == "d.csv:1: duplicate column 'a'");
  CHECK(error_of(parse_csv("a,\n", "d.csv")) == "d.csv:1: column 2 has no name");
  CHECK(error_of(parse_csv("a\n\"open\n", "d.csv")) == "d.csv:2: a quoted field is never closed");
  CHECK(error_of(parse_csv("", "d.csv")) == "d.csv: empty file (a header row is required)");
  CHECK(error_of(parse_csv("1,2.5\n3,4\n", "d.csv")) ==
        "d.csv:1: the first row holds only numbers; a header row naming the columns is required");
}

TEST_CASE("a CSV becomes standardised numbers and sorted one-hot categories", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("pets.csv");
  write_text(path,
             "age,colour,weight,kind\n"
             "1,red,2.0,cat\n"
             "3,blue,4.0,dog\n"
             "5,\"red\",6.0,cat\n"
             "7,green,8.0,bird\n");
  auto r = load_csv(path, target("kind"), no_split());
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  const Dataset& d = r->data;
  CHECK(d.count == 4);
  CHECK(d.sample_shape == mls::Shape{5});  // age, blue, green, red, weight
  CHECK(d.class_names == std::vector<std::string>{"bird", "cat", "dog"});
  CHECK(d.labels == std::vector<int64_t>{1, 2, 1, 0});
  // age: mean 4, population std sqrt(5); weight: mean 5, std sqrt(5).
  const float s = static_cast<float>(std::sqrt(5.0));
  const std::vector<float> row0{-3 / s, 0, 0, 1, -3 / s};
  const std::vector<float> row3{3 / s, 0, 1, 0, 3 / s};
  for (size_t k = 0; k < 5; ++k) {
    CHECK(d.floats[k] == Approx(row0[k]));
    CHECK(d.floats[15 + k] == Approx(row3[k]));
  }
  const CsvEncoding& e = r->encoding;
  REQUIRE(e.features.size() == 3);
  CHECK(e.features[1].categories == std::vector<std::string>{"blue", "green", "red"});
  CHECK(e.width() == 5);
}

TEST_CASE("CSV options: chosen features, forced categorical, no standardisation", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("d.csv");
  write_text(path, "a,b,c,y\n1,10,x,0\n2,20,y,1\n2,30,x,1\n");
  CsvOptions o = target("y");
  o.features = {"b", "a"};
  o.categorical = {"a"};
  o.standardize = false;
  auto r = load_csv(path, o, no_split());
  REQUIRE(r.ok());
  CHECK(r->data.sample_shape == mls::Shape{3});  // b, a=1, a=2
  CHECK(r->data.floats == std::vector<float>{10, 1, 0, 20, 0, 1, 30, 0, 1});
  CHECK(r->data.class_names == std::vector<std::string>{"0", "1"});
}

TEST_CASE("integer class labels sort numerically", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("d.csv");
  write_text(path, "x,y\n1,10\n2,2\n3,9\n");
  auto r = load_csv(path, target("y"), no_split());
  REQUIRE(r.ok());
  CHECK(r->data.class_names == std::vector<std::string>{"2", "9", "10"});
  CHECK(r->data.labels == std::vector<int64_t>{2, 0, 1});
}

TEST_CASE("CSV regression reads float targets, one or several", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("r.csv");
  write_text(path, "x,y1,y2\n1,0.5,-1\n2,1.5,-2\n");
  CsvOptions o;
  o.target = {"y1", "y2"};
  o.regression = true;
  o.standardize = false;
  auto r = load_csv(path, o, no_split());
  REQUIRE(r.ok());
  CHECK(r->data.target_kind == TargetKind::Values);
  CHECK(r->data.target_shape == mls::Shape{2});
  CHECK(r->data.targets == std::vector<float>{0.5f, -1, 1.5f, -2});
  CHECK(r->data.floats == std::vector<float>{1, 2});
  CHECK(r->data.num_classes == 0);
}

TEST_CASE("a text cell in a numeric CSV column names file, line and column", "[csv][errors]") {
  TempDir dir;
  const std::string path = dir.file("data.csv");
  std::string text = "age,y\n";
  for (int i = 0; i < 15; ++i) text += std::to_string(20 + i) + ",a\n";
  text += "abc,b\n";  // line 17
  write_text(path, text);
  CHECK(error_of(load_csv(path, target("y"), no_split())) ==
        path + ":17: column 'age': 'abc' is not a number");

  CsvOptions reg;
  reg.target = {"age"};
  reg.regression = true;
  write_text(path, "x,age\nq,1\nr,2x\n");
  CHECK(error_of(load_csv(path, reg, no_split())) ==
        path + ":3: column 'age': '2x' is not a number");
}

TEST_CASE("missing CSV values: error by default, or drop, or fill with the mean", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("m.csv");
  write_text(path, "a,b,y\n1,NA,p\n3,4,q\n5,nan,p\n,8,q\n7,6,\n");
  CsvOptions o = target("y");
  o.standardize = false;
  CHECK_THAT(error_of(load_csv(path, o, no_split())),
             Contains(path + ":2: column 'b': missing value"));

  o.missing = MissingPolicy::Drop;
  auto dropped = load_csv(path, o, no_split());
  REQUIRE(dropped.ok());
  CHECK(dropped->data.count == 1);
  CHECK(dropped->data.floats == std::vector<float>{3, 4});

  o.missing = MissingPolicy::Mean;
  auto filled = load_csv(path, o, no_split());
  REQUIRE(filled.ok());
  // The row with no target (line 6) is dropped; a: mean of 1, 3, 5 = 3; b: mean of 4, 8 = 6.
  CHECK(filled->data.count == 4);
  CHECK(filled->data.floats == std::vector<float>{1, 6, 3, 4, 5, 6, 3, 8});
}

TEST_CASE("CSV column errors", "[csv][errors]") {
  TempDir dir;
  const std::string path = dir.file("c.csv");
  write_text(path, "a,b\n1,2\n");
  CHECK(error_of(load_csv(path, target("z"), no_split())) ==
        path + ": no column 'z' (the header has 'a', 'b')");
  CsvOptions o = target("b");
  o.features = {"b"};
  CHECK(error_of(load_csv(path, o, no_split())) ==
        path + ": column 'b' is both target and feature");
  CHECK(error_of(load_csv(dir.file("none.csv"), target("b"), no_split())) ==
        dir.file("none.csv") + ": file not found");
}

TEST_CASE("CSV statistics come from the training split only", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("s.csv");
  std::string text = "x,y\n";
  for (int i = 0; i < 10; ++i)
    text += std::to_string(i < 8 ? 1 : 100) + "," + std::to_string(i % 2) + "\n";
  write_text(path, text);
  SplitPlan p;
  p.test_fraction = 0.2;
  p.seed = 1;
  auto r = load_csv(path, target("y"), p);
  REQUIRE(r.ok());
  double sum = 0;
  for (int64_t i : r->splits.train) sum += i < 8 ? 1 : 100;
  const double mean = sum / static_cast<double>(r->splits.train.size());
  CHECK(r->encoding.features[0].mean == Approx(mean));
  CHECK(r->splits.test.size() == 2);
}

TEST_CASE("a CSV encoding turns new rows into the training layout", "[csv]") {
  TempDir dir;
  const std::string path = dir.file("t.csv");
  write_text(path, "n,c,y\n0,a,0\n2,b,1\n");
  auto r = load_csv(path, target("y"), no_split());
  REQUIRE(r.ok());
  // Columns in another order, the target absent: looked up by name.
  auto rows = parse_csv("c,n\nb,1\na,3\n", "new.csv");
  REQUIRE(rows.ok());
  std::vector<float> x;
  REQUIRE(r->encoding.encode(*rows, "new.csv", x).ok());
  CHECK(x == std::vector<float>{0, 0, 1, 2, 1, 0});  // n: (v - 1) / 1; c one-hot a, b

  auto unknown = parse_csv("n,c\n1,zebra\n", "new.csv");
  std::vector<float> y;
  CHECK(error_of(r->encoding.encode(*unknown, "new.csv", y)) ==
        "new.csv:2: column 'c': unknown category 'zebra' (known: 'a', 'b')");
  auto missing_col = parse_csv("n\n1\n", "new.csv");
  CHECK_THAT(error_of(r->encoding.encode(*missing_col, "new.csv", y)),
             Contains("new.csv: no column 'c'"));
}
