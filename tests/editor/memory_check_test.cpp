// A model too large for this machine, typed into the Inspector as a person would, then
// trained with the Train key (F5): the run is refused by the pre-flight estimate before anything is
// allocated. (The GUI monkey once typed such a width; filling the weights took every byte of
// memory while Stop could not interrupt it, and the kernel killed the editor.)
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>

#include "nodes/document.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

TEST_CASE("a model that will not fit in memory, typed into the Inspector, is refused by Train before it allocates",
          "[editor][train][memory]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  fx.window->scene()->selectNode("fc1");
  QTest::qWait(10);
  REQUIRE(fx.window->inspector()->nodeId() == "fc1");
  auto* out = fx.window->inspector()->findChild<QSpinBox*>("param.out_features");
  REQUIRE(out);
  QLineEdit* text = out->findChild<QLineEdit*>();
  REQUIRE(text);
  // 16 million outputs: 784 x 16e6 weights, 54 GiB of parameters and as much optimizer state.
  QTest::mouseClick(text, Qt::LeftButton, {}, QPoint(8, text->height() / 2));
  QTest::keyClick(text, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(text, "16000000");
  QTest::keyClick(text, Qt::Key_Return);
  const nodes::Document& doc = fx.window->model()->doc();
  REQUIRE(doc.nodes[*nodes::find_node(doc, "fc1")].params["out_features"] == 16000000);

  DocumentModel* m = fx.window->model();
  for (int i = 0; i < 500 && !m->analysis().complete(); ++i) QTest::qWait(20);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy failed(fx.window->trainer(), &TrainController::failed);
  QTest::keySequence(fx.window.get(), train_key());
  for (int i = 0; i < 3000 && finished.isEmpty() && failed.isEmpty(); ++i) QTest::qWait(20);
  REQUIRE(failed.count() == 1);
  CHECK(finished.isEmpty());
  const QString why = failed.at(0).at(0).toString();
  INFO(why.toStdString());
  CHECK(why.contains("the run was not started"));
  CHECK(why.contains("is free"));
  CHECK(fx.window->runLog()->toPlainText().contains("the run was not started"));
  CHECK_FALSE(fx.window->trainer()->running());
}
