// The inspector driven as a user drives it: real key and mouse events into its real widgets
// (typing and Enter or Tab in number and text fields, the spin boxes' arrows, checkboxes),
// on the bundled examples. Each edit must land in the document, undo must bring the old
// value back into the same field, and the field being edited must survive its own signal
// (the form used to be rebuilt, deleting the spin box whose signal was being delivered).
#include <QAbstractSpinBox>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QPointer>
#include <QSpinBox>
#include <QStyle>
#include <QStyleOptionSpinBox>

#include "nodes/document.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

template <class W>
W* field(EditorFixture& fx, const QString& name) {
  return fx.window->inspector()->findChild<W*>(name);
}

const nodes::NodeDoc& node(EditorFixture& fx, const std::string& id) {
  const nodes::Document& doc = fx.window->model()->doc();
  auto i = nodes::find_node(doc, id);
  REQUIRE(i.has_value());
  return doc.nodes[*i];
}

// Keyboard focus needs an active window (Tab moves focus, and leaving a field commits it).
void activate(EditorFixture& fx) {
  fx.window->activateWindow();
  fx.window->raise();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
}

void select(EditorFixture& fx, const std::string& id) {
  fx.window->scene()->selectNode(id);
  if (id.empty()) fx.window->scene()->clearSelection();
  QTest::qWait(10);
  REQUIRE(fx.window->inspector()->nodeId() == id);
}

// Clicks into the field's text, selects what is there and types `text`, then presses `key`
// (Enter or Tab). False when the field did not survive.
bool type_into(QWidget* w, const QString& text, Qt::Key key) {
  QPointer<QWidget> alive(w);
  QWidget* target = w;
  if (auto* s = qobject_cast<QAbstractSpinBox*>(w)) target = s->findChild<QLineEdit*>();
  REQUIRE(target);
  QTest::mouseClick(target, Qt::LeftButton, {}, QPoint(8, target->height() / 2));
  if (!alive) return false;
  REQUIRE(w->hasFocus());
  QTest::keyClick(target, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(target, text);
  QTest::keyClick(target, key);
  QTest::qWait(10);
  return !alive.isNull();
}

// Presses and releases the mouse on a spin box's up arrow (where the style draws it).
bool click_up_arrow(QAbstractSpinBox* s) {
  QStyleOptionSpinBox opt;
  opt.initFrom(s);
  opt.rect = s->rect();
  opt.frame = s->hasFrame();
  opt.subControls = QStyle::SC_SpinBoxFrame | QStyle::SC_SpinBoxEditField | QStyle::SC_SpinBoxUp |
                    QStyle::SC_SpinBoxDown;
  opt.buttonSymbols = s->buttonSymbols();
  opt.stepEnabled = QAbstractSpinBox::StepUpEnabled | QAbstractSpinBox::StepDownEnabled;
  const QRect up = s->style()->subControlRect(QStyle::CC_SpinBox, &opt, QStyle::SC_SpinBoxUp, s);
  REQUIRE(up.isValid());
  QPointer<QAbstractSpinBox> alive(s);
  QTest::mousePress(s, Qt::LeftButton, {}, up.center());
  if (!alive) return false;
  QTest::mouseRelease(s, Qt::LeftButton, {}, up.center());
  QTest::qWait(10);
  return !alive.isNull();
}

}  // namespace

TEST_CASE("inspector: typing a number and Enter or Tab lands in the document - undoably",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  activate(fx);
  select(fx, "fc2");
  QPointer<QSpinBox> out = field<QSpinBox>(fx, "param.out_features");
  REQUIRE(out);
  CHECK(out->value() == 128);

  REQUIRE(type_into(out, "77", Qt::Key_Enter));
  CHECK(node(fx, "fc2").params["out_features"] == 77);
  REQUIRE(out);  // the field being edited stays
  CHECK(out->value() == 77);

  REQUIRE(type_into(out, "55", Qt::Key_Tab));
  CHECK(node(fx, "fc2").params["out_features"] == 55);
  REQUIRE(out);
  CHECK(out->value() == 55);
  // Tab went on to the next field of the form, which is still there to type into.
  QWidget* next = QApplication::focusWidget();
  REQUIRE(next);
  CHECK(next != out.data());
  CHECK(fx.window->inspector()->isAncestorOf(next));

  // Undo puts each old value back into the same field.
  fx.window->model()->undoStack()->undo();
  CHECK(node(fx, "fc2").params["out_features"] == 77);
  REQUIRE(out);
  CHECK(out->value() == 77);
  fx.window->model()->undoStack()->undo();
  CHECK(node(fx, "fc2").params["out_features"] == 128);
  CHECK(out->value() == 128);
}

TEST_CASE("inspector: a real number typed into a float field lands in the document",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  activate(fx);
  select(fx, "loss");
  QPointer<QDoubleSpinBox> ls = field<QDoubleSpinBox>(fx, "param.label_smoothing");
  REQUIRE(ls);
  REQUIRE(type_into(ls, "0.25", Qt::Key_Return));
  CHECK(node(fx, "loss").params["label_smoothing"].get<double>() == Approx(0.25));
  REQUIRE(type_into(ls, "0.125", Qt::Key_Tab));
  CHECK(node(fx, "loss").params["label_smoothing"].get<double>() == Approx(0.125));
  REQUIRE(ls);
  CHECK(ls->value() == Approx(0.125));
  fx.window->model()->undoStack()->undo();
  CHECK(ls->value() == Approx(0.25));
}

TEST_CASE("inspector: the spin box arrows step the value - click after click",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-cnn.mls");
  activate(fx);
  select(fx, "conv2");
  QPointer<QSpinBox> oc = field<QSpinBox>(fx, "param.out_channels");
  REQUIRE(oc);
  REQUIRE(click_up_arrow(oc));
  CHECK(node(fx, "conv2").params["out_channels"] == 17);
  REQUIRE(click_up_arrow(oc));
  CHECK(node(fx, "conv2").params["out_channels"] == 18);
  CHECK(oc->value() == 18);
  fx.window->model()->undoStack()->undo();
  CHECK(node(fx, "conv2").params["out_channels"] == 17);
  CHECK(oc->value() == 17);
}

TEST_CASE("inspector: ticking a checkbox with the mouse lands in the document - undoably",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  activate(fx);
  select(fx, "fc1");
  QPointer<QCheckBox> bias = field<QCheckBox>(fx, "param.bias");
  REQUIRE(bias);
  CHECK(bias->isChecked());
  QTest::mouseClick(bias, Qt::LeftButton, {}, QPoint(6, bias->height() / 2));
  QTest::qWait(10);
  CHECK(node(fx, "fc1").params["bias"] == false);
  REQUIRE(bias);
  CHECK_FALSE(bias->isChecked());
  QTest::mouseClick(bias, Qt::LeftButton, {}, QPoint(6, bias->height() / 2));
  QTest::qWait(10);
  CHECK(node(fx, "fc1").params["bias"] == true);
  fx.window->model()->undoStack()->undo();
  REQUIRE(bias);
  CHECK_FALSE(bias->isChecked());
  CHECK(node(fx, "fc1").params["bias"] == false);
}

TEST_CASE("inspector: text fields (the id and a JSON value) commit on Enter and Tab",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-cnn.mls");
  activate(fx);
  select(fx, "conv1");
  QPointer<QLineEdit> id = field<QLineEdit>(fx, "inspector.id");
  REQUIRE(id);
  type_into(id, "first_conv", Qt::Key_Enter);
  CHECK(nodes::find_node(fx.window->model()->doc(), "first_conv").has_value());
  // The canvas drops its selection of the old name; the inspector stays on the node.
  QTest::qWait(10);
  CHECK(fx.window->inspector()->nodeId() == "first_conv");
  REQUIRE(field<QLineEdit>(fx, "inspector.id"));
  CHECK(field<QLineEdit>(fx, "inspector.id")->text() == "first_conv");
  // Parameters that are not one number are edited as JSON text.
  auto* ks = field<QWidget>(fx, "param.kernel_size");
  REQUIRE(ks);
  if (auto* e = qobject_cast<QLineEdit*>(ks)) {
    REQUIRE(type_into(e, "3", Qt::Key_Tab));
  } else {
    REQUIRE(type_into(ks, "3", Qt::Key_Tab));
  }
  CHECK(node(fx, "first_conv").params["kernel_size"] == 3);
  fx.window->model()->undoStack()->undo();
  fx.window->model()->undoStack()->undo();
  CHECK(nodes::find_node(fx.window->model()->doc(), "conv1").has_value());
  CHECK(node(fx, "conv1").params["kernel_size"] == 5);
}

TEST_CASE("inspector: the project's Epochs and batch size and learning rate take typed values",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  activate(fx);
  select(fx, "");
  QPointer<QSpinBox> epochs = field<QSpinBox>(fx, "training.epochs");
  REQUIRE(epochs);
  REQUIRE(type_into(epochs, "3", Qt::Key_Enter));
  CHECK(fx.window->model()->doc().training.epochs == 3);
  REQUIRE(epochs);
  CHECK(fx.window->findChild<QSpinBox*>("toolbar.epochs")->value() == 3);
  REQUIRE(click_up_arrow(epochs));
  CHECK(fx.window->model()->doc().training.epochs == 4);
  REQUIRE(type_into(epochs, "6", Qt::Key_Tab));
  CHECK(fx.window->model()->doc().training.epochs == 6);

  QPointer<QSpinBox> batch = field<QSpinBox>(fx, "training.batch_size");
  REQUIRE(batch);
  REQUIRE(type_into(batch, "32", Qt::Key_Enter));
  CHECK(fx.window->model()->doc().training.batch_size == 32);

  QPointer<QDoubleSpinBox> lr = field<QDoubleSpinBox>(fx, "training.lr");
  REQUIRE(lr);
  REQUIRE(type_into(lr, "0.02", Qt::Key_Tab));
  CHECK(fx.window->model()->doc().training.optimizer.lr == Approx(0.02));

  fx.window->model()->undoStack()->undo();
  CHECK(fx.window->model()->doc().training.optimizer.lr == Approx(0.05));
  REQUIRE(lr);
  CHECK(lr->value() == Approx(0.05));
}

TEST_CASE("inspector: every number field of every bundled example steps with its up arrow",
          "[editor][inspector]") {
  EditorFixture fx;
  const QStringList examples =
      QDir(MLS_SOURCE_DIR "/resources/examples").entryList({"*.mls"}, QDir::Files, QDir::Name);
  REQUIRE(examples.size() >= 5);
  activate(fx);
  int stepped = 0;
  for (const QString& ex : examples) {
    INFO(ex.toStdString());
    fx.open_example(ex.toUtf8().constData());
    std::vector<std::string> ids;
    for (const auto& n : fx.window->model()->doc().nodes) ids.push_back(n.id);
    ids.push_back("");  // the project's settings
    for (const std::string& id : ids) {
      INFO("node '" << id << "'");
      select(fx, id);
      const std::string before = fx.window->model()->text();
      for (QSpinBox* s : fx.window->inspector()->findChildren<QSpinBox*>()) {
        INFO(s->objectName().toStdString());
        if (s->value() == s->maximum()) continue;
        const int v = s->value();
        const size_t undo = static_cast<size_t>(fx.window->model()->undoStack()->index());
        REQUIRE(click_up_arrow(s));
        CHECK(s->value() == v + 1);
        CHECK(static_cast<size_t>(fx.window->model()->undoStack()->index()) == undo + 1);
        ++stepped;
      }
      while (fx.window->model()->undoStack()->canUndo() && fx.window->model()->text() != before)
        fx.window->model()->undoStack()->undo();
      CHECK(fx.window->model()->text() == before);
    }
  }
  CHECK(stepped > 40);
}

TEST_CASE("inspector: a learning rate above 10 or below 1e-6 is taken as typed - not capped",
          "[editor][inspector]") {
  EditorFixture fx;
  fx.open_example("two-blobs-logistic.mls");
  activate(fx);
  select(fx, "");
  QPointer<QDoubleSpinBox> lr = field<QDoubleSpinBox>(fx, "training.lr");
  REQUIRE(lr);
  REQUIRE(type_into(lr, "20", Qt::Key_Enter));
  CHECK(fx.window->model()->doc().training.optimizer.lr == 20.0);
  CHECK(lr->text() == "20");
  REQUIRE(type_into(lr, "1e-7", Qt::Key_Enter));
  CHECK(fx.window->model()->doc().training.optimizer.lr == 1e-7);
  CHECK(lr->text() == "1e-07");
  // The toolbar's field too, and it shows what the inspector set.
  auto* bar = fx.window->findChild<QDoubleSpinBox*>("toolbar.lr");
  REQUIRE(bar);
  CHECK(bar->value() == 1e-7);
  REQUIRE(type_into(bar, "150", Qt::Key_Tab));
  CHECK(fx.window->model()->doc().training.optimizer.lr == 150.0);
  CHECK(lr->value() == 150.0);
  // What the document refuses is refused with its reason, and the value stays.
  REQUIRE(type_into(lr, "0", Qt::Key_Enter));
  CHECK(fx.window->model()->doc().training.optimizer.lr == 150.0);
  CHECK(lr->value() == 150.0);
}
