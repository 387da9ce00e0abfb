// The sweep's search space: --param specs, grid, random and TPE (runner/sweep_space.h).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "runner/sweep_space.h"

using namespace mls::runner;
using json = nlohmann::json;

namespace {

SweepParam param(const std::string& text) {
  auto p = parse_sweep_param(text);
  INFO(text);
  REQUIRE(p);
  return *p;
}

std::string error_of(const std::string& text) {
  auto p = parse_sweep_param(text);
  REQUIRE_FALSE(p);
  return p.error().message;
}

}  // namespace

TEST_CASE("sweep space: each spec form parses to its range or choice", "[sweep]") {
  SweepParam lr = param("lr=1e-3:1e-1:log");
  CHECK(lr.name == "lr");
  CHECK(lr.lo == 1e-3);
  CHECK(lr.hi == 1e-1);
  CHECK(lr.log);
  CHECK_FALSE(lr.integer);
  CHECK_FALSE(lr.is_choice());

  SweepParam d = param("dropout=0:0.5");
  CHECK(d.lo == 0);
  CHECK(d.hi == 0.5);
  CHECK_FALSE(d.log);

  SweepParam u = param("fc1.out_features=32:256:int");
  CHECK(u.name == "fc1.out_features");
  CHECK(u.integer);
  CHECK_FALSE(u.log);
  SweepParam ul = param("units=16:1024:log:int");
  CHECK(ul.integer);
  CHECK(ul.log);
  CHECK(param("units=16:1024:int:log").log);

  SweepParam b = param("batch_size=64,128");
  REQUIRE(b.choices.size() == 2);
  CHECK(b.choices[0] == json(64));
  CHECK(b.choices[1] == json(128));
  SweepParam o = param("optimizer=sgd, adam");
  REQUIRE(o.choices.size() == 2);
  CHECK(o.choices[0] == json("sgd"));
  CHECK(o.choices[1] == json("adam"));
  // One value: a choice of one (a setting held fixed across the sweep).
  CHECK(param("momentum=0.9").choices == std::vector<json>{json(0.9)});
}

TEST_CASE("sweep space: a bad spec names the param and the bad part", "[sweep]") {
  CHECK(error_of("lr") ==
        "--param 'lr': expected NAME=SPEC (lr=1e-3:1e-1:log, dropout=0:0.5, "
        "units=32:256:int, batch_size=64,128)");
  CHECK(error_of("lr=1e-3:x:log") ==
        "--param 'lr=1e-3:x:log': 'x' is not a number (the range's "
        "high end)");
  CHECK(error_of("lr=abc:1") == "--param 'lr=abc:1': 'abc' is not a number (the range's low end)");
  CHECK(error_of("lr=1e-3:1e-1:lg") ==
        "--param 'lr=1e-3:1e-1:lg': 'lg' is not a range option (log or int)");
  CHECK(error_of("lr=0:1:log") == "--param 'lr=0:1:log': a log range needs a low end > 0, got 0");
  CHECK(error_of("lr=0.1:0.01") ==
        "--param 'lr=0.1:0.01': the low end 0.1 must be less than the high end 0.01");
  CHECK(error_of("units=32.5:64:int") ==
        "--param 'units=32.5:64:int': an int range needs whole numbers, got 32.5:64");
  CHECK(error_of("bs=64,,128") ==
        "--param 'bs=64,,128': an empty choice (two commas, or one at an end)");
  CHECK(error_of("bs=64,128,64") == "--param 'bs=64,128,64': '64' given twice");
  CHECK(error_of("=1:2") == "--param '=1:2': no name before '='");
  CHECK(error_of("lr=") == "--param 'lr=': no values after '='");
  CHECK(error_of("lr=1:2:log:log") == "--param 'lr=1:2:log:log': 'log' given twice");
  auto twice = parse_sweep_space({"lr=0.1,0.2", "lr=1e-3:1e-1:log"});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message ==
        "--param 'lr=1e-3:1e-1:log': 'lr' is already swept (--param 'lr=0.1,0.2')");
  CHECK_FALSE(parse_sweep_space({}));
}

TEST_CASE("sweep space: the grid is the product, log ranges log-spaced, ints rounded", "[sweep]") {
  auto space = parse_sweep_space({"lr=1e-3:1e-1:log", "batch_size=64,128", "units=1:2:int"});
  REQUIRE(space);
  auto grid = grid_trials(*space, 3);
  REQUIRE(grid);
  // 3 lr values x 2 batch sizes x 2 units (1, 1.5 -> 2, 2: repeats dropped).
  REQUIRE(grid->size() == 12);
  std::set<std::string> distinct;
  for (const json& t : *grid) distinct.insert(t.dump());
  CHECK(distinct.size() == 12);
  // The first param varies slowest.
  CHECK((*grid)[0]["lr"].get<double>() == Approx(1e-3));
  CHECK((*grid)[3]["lr"].get<double>() == Approx(1e-3));
  CHECK((*grid)[4]["lr"].get<double>() == Approx(1e-2));  // the geometric middle
  CHECK((*grid)[11]["lr"].get<double>() == Approx(1e-1));
  CHECK((*grid)[0]["batch_size"] == json(64));
  CHECK((*grid)[2]["batch_size"] == json(128));
  CHECK((*grid)[0]["units"] == json(1));
  CHECK((*grid)[1]["units"] == json(2));
  CHECK((*grid)[1]["units"].is_number_integer());

  auto lin = parse_sweep_space({"dropout=0:0.5"});
  REQUIRE(lin);
  auto five = grid_trials(*lin, 5);
  REQUIRE(five);
  REQUIRE(five->size() == 5);
  CHECK((*five)[1]["dropout"].get<double>() == Approx(0.125));
  auto one = grid_trials(*lin, 1);
  REQUIRE(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0]["dropout"].get<double>() == Approx(0.25));

  auto big = grid_trials(*space, 3, 10);
  REQUIRE_FALSE(big);
  CHECK(big.error().message ==
        "the grid has 12 combinations, more than 10 (fewer --grid-points, or --method random)");
}

TEST_CASE("sweep space: random trials stay in bounds and repeat for the same seed", "[sweep]") {
  auto space = parse_sweep_space(
      {"lr=1e-4:1e-1:log", "dropout=0:0.5", "units=16:1024:log:int", "optimizer=sgd,adam"});
  REQUIRE(space);
  int small_lr = 0, sgd = 0, small_units = 0;
  const int n = 400;
  for (int t = 0; t < n; ++t) {
    const json p = random_trial(*space, 7, t);
    const double lr = p["lr"].get<double>();
    CHECK(lr >= 1e-4);
    CHECK(lr <= 1e-1);
    small_lr += lr < 1e-2;  // log-uniform: 2/3 of the decades lie below 1e-2
    CHECK(p["dropout"].get<double>() >= 0);
    CHECK(p["dropout"].get<double>() <= 0.5);
    REQUIRE(p["units"].is_number_integer());
    CHECK(p["units"].get<int64_t>() >= 16);
    CHECK(p["units"].get<int64_t>() <= 1024);
    small_units += p["units"].get<int64_t>() < 128;  // half of log2's range below 128
    CHECK((p["optimizer"] == json("sgd") || p["optimizer"] == json("adam")));
    sgd += p["optimizer"] == json("sgd");
    CHECK(random_trial(*space, 7, t) == p);  // the same seed and trial, the same params
  }
  CHECK(small_lr > n * 0.55);
  CHECK(small_lr < n * 0.78);
  CHECK(small_units > n * 0.38);
  CHECK(small_units < n * 0.62);
  CHECK(sgd > n * 0.38);
  CHECK(sgd < n * 0.62);
  CHECK(random_trial(*space, 8, 0) != random_trial(*space, 7, 0));
  CHECK(random_trial(*space, 7, 1) != random_trial(*space, 7, 0));
}

TEST_CASE("sweep space: a --set text reads numbers back exactly and words as themselves",
          "[sweep]") {
  CHECK(sweep_setting("lr", json(0.1)) == "lr=0.1");
  CHECK(sweep_setting("batch_size", json(64)) == "batch_size=64");
  CHECK(sweep_setting("optimizer", json("adam")) == "optimizer=adam");
  const double x = 0.012345678901234567;
  CHECK(std::stod(sweep_setting("lr", json(x)).substr(3)) == x);
  auto space = parse_sweep_space({"lr=1e-3:1e-1:log", "optimizer=sgd,adam"});
  REQUIRE(space);
  CHECK(params_text(*space, {{"optimizer", "adam"}, {"lr", 0.0123456}}) ==
        "lr=0.01235 optimizer=adam");
}

namespace {

// (log10 lr + 2)^2: the best lr is 1e-2.
double bowl(const json& p) {
  return std::pow(std::log10(p["lr"].get<double>()) + 2.0, 2.0);
}

// How far the 10 best of 40 trials, sampled one after another, lie from the optimum: the
// median of |log10 lr + 2| over them (the median log10 lr alone is near -2 for random search
// too, the bowl being symmetric).
double best_spread(bool tpe, uint64_t seed) {
  auto space = parse_sweep_space({"lr=1e-5:1:log", "optimizer=sgd,adam,rmsprop"});
  REQUIRE(space);
  std::vector<Observation> ended;
  for (int t = 0; t < 40; ++t) {
    json p = tpe ? tpe_trial(*space, ended, seed, t) : random_trial(*space, seed, t);
    // The choice matters too: sgd is best.
    const double value = bowl(p) + (p["optimizer"] == json("sgd") ? 0.0 : 0.5);
    ended.push_back({p, value, false});
  }
  std::sort(ended.begin(), ended.end(),
            [](const Observation& a, const Observation& b) { return a.value < b.value; });
  std::vector<double> lrs;
  for (int i = 0; i < 10; ++i)
    lrs.push_back(std::fabs(std::log10(ended[i].params["lr"].get<double>()) + 2.0));
  std::sort(lrs.begin(), lrs.end());
  return 0.5 * (lrs[4] + lrs[5]);
}

}  // namespace

TEST_CASE("sweep space: TPE concentrates on the optimum of a known function, random does not",
          "[sweep]") {
  // The same seeds for both. Over 20 seeds TPE was nearer in 18, its mean spread 0.12 decades
  // against random's 0.30.
  int tpe_nearer = 0;
  double tpe_sum = 0, rnd_sum = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const double tpe = best_spread(true, seed), rnd = best_spread(false, seed);
    INFO("seed " << seed << ": the best 10's median distance from log10 lr = -2: TPE " << tpe
                 << ", random " << rnd);
    tpe_nearer += tpe < rnd;
    tpe_sum += tpe;
    rnd_sum += rnd;
  }
  CHECK(tpe_nearer >= 8);
  CHECK(tpe_sum < 0.6 * rnd_sum);
}

TEST_CASE("sweep space: TPE is random until n_startup trials ended, and reproducible", "[sweep]") {
  auto space = parse_sweep_space({"lr=1e-5:1:log", "units=8:64:int"});
  REQUIRE(space);
  std::vector<Observation> ended;
  for (int t = 0; t < 10; ++t) {
    json p = tpe_trial(*space, ended, 3, t);
    CHECK(p == random_trial(*space, 3, t));
    ended.push_back({p, bowl(p), false});
  }
  const json a = tpe_trial(*space, ended, 3, 10);
  CHECK(a == tpe_trial(*space, ended, 3, 10));
  CHECK(a != random_trial(*space, 3, 10));
  REQUIRE(a["units"].is_number_integer());
  CHECK(a["units"].get<int64_t>() >= 8);
  CHECK(a["units"].get<int64_t>() <= 64);
  CHECK(a["lr"].get<double>() >= 1e-5);
  CHECK(a["lr"].get<double>() <= 1);
}
