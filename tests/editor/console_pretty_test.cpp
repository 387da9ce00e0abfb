// The editor's Lua console shows tables as trees (print and results) and has help().
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

TEST_CASE("the Lua console prints tables as trees and answers help()", "[editor][lua]") {
  EditorFixture fx;
  ConsoleWidget* c = fx.window->console();
  CHECK(c->submit("{a = 1, b = {2, 3}}") == "{\n  a = 1,\n  b = {2, 3},\n}");
  CHECK(c->submit("print({x = 'y'}, 2)") == "{x = \"y\"}\t2");
  CHECK(c->submit("tostring({}):sub(1, 6)") == "table:");
  const QString h = c->submit("help(mls.zeros)");
  CHECK(h.startsWith("mls.zeros(shape [, dtype])"));
  CHECK(h.contains("example: mls.zeros{2, 3}"));
}
