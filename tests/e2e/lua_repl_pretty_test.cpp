// `mlstudio lua` with entries on stdin: results and print show tables as trees, and help()
// answers, through the real binary.
#include <fstream>

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

TEST_CASE("mlstudio lua: tables print as trees and help() documents mls", "[e2e][lua]") {
  const fs::path in = temp_dir() / "repl_pretty.lua";
  {
    std::ofstream f(in);
    f << "{a = 1, b = {2, 3}}\n"
         "print({x = 'y', t = mls.zeros{2}})\n"
         "tostring({}):sub(1, 6)\n"
         "help(mls.ones)\n";
  }
  const Output o =
      run("lua --db " + (temp_dir() / "repl_pretty.db").string() + " < " + in.string(), 60);
  INFO(o.out << o.err);
  CHECK(o.code == 0);
  CHECK(o.out.find("{\n  a = 1,\n  b = {2, 3},\n}\n") != std::string::npos);
  CHECK(o.out.find("{t = tensor([0.0000, 0.0000]), x = \"y\"}\n") != std::string::npos);
  CHECK(o.out.find("\ntable:\n") != std::string::npos);
  CHECK(o.out.find("mls.ones(shape [, dtype])\n  a tensor of ones\n  example: mls.ones{2, 3}") !=
        std::string::npos);
}
