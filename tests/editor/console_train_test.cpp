// mls.train typed into the Lua console goes through the run session like the Train
// button: the run is recorded, and the Instruments tab follows it live.
#include <QTabWidget>
#include <QTest>

#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

TEST_CASE("a run started from the Lua console feeds the Instruments tab", "[editor][lua][train]") {
  EditorFixture fx;
  ConsoleWidget* c = fx.window->console();
  InstrumentsPanel* panel = fx.window->instruments();
  fx.window->show();
  for (QTabWidget* tabs : fx.window->findChildren<QTabWidget*>())
    if (tabs->indexOf(panel) >= 0) tabs->setCurrentWidget(panel);
  REQUIRE(QTest::qWaitForWindowExposed(fx.window.get()));
  CHECK(panel->stepPoints() == 0);
  c->submit("mls.manual_seed(3)");
  c->submit("net = mls.nn.Sequential(mls.nn.Flatten(), mls.nn.Linear(784, 32), mls.nn.ReLU(), "
            "mls.nn.Linear(32, 10))");
  c->submit("data = mls.data.fashion_mnist{limit = 1024, test_limit = 128}");
  const QString out = c->submit("r = mls.train{model = net, data = data, epochs = 2, batch_size = 64}");
  INFO(out.toStdString());
  INFO(c->findChild<QPlainTextEdit*>("console.output")->toPlainText().toStdString());
  CHECK(c->submit("r.run_id") == "1");
  for (int i = 0; i < 30; ++i) QTest::qWait(10);  // the last points reach the panel on its next frame
  // The dashboard drew this run's 32 steps (1024 / 64 per epoch, 2 epochs).
  CHECK(panel->stepPoints() == 32);
  CHECK(panel->phase() == RunPhase::Done);
  CHECK(panel->statusLine().find("done") != std::string::npos);
  auto store = store::RunStore::open_read_only(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  CHECK((*store)->get_run(1)->status == "finished");
}
