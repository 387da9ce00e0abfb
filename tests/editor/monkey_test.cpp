// The monkey: a seeded generator of real input events on the real main window (mouse presses,
// moves and releases on the canvas, palette drops, wires dragged between ports, keys typed into
// every field of the Inspector and the toolbar, shortcuts, tab switches, training started and
// stopped). The tests drive the widgets, not the model, so a crash in a widget's own signal (the
// Inspector's deleted spin box) is met as a person meets it.
//
//   xvfb-run -a -s "-screen 0 1600x1000x24" build/tests/editor_tests "[monkey]"
//   MLS_MONKEY_SEED=7 MLS_MONKEY_EVENTS=20000 MLS_MONKEY_SECONDS=600 ... "[monkey]"
//   scripts/monkey 600 7          # the same under AddressSanitizer (build-asan-gui/)
//
// MLS_MONKEY_LOG=FILE writes every event as it happens (the last lines name what crashed);
// under ASan the last events are printed with the report. MLS_MONKEY_SKIP=a,b leaves
// actions out by name (see kActions; "instruments": the Instruments tab). After each segment the
// history is undone to the start and redone to the end, and both must give back the document
// exactly.
#include <QAbstractSpinBox>
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QDropEvent>
#include <QFile>
#include <QLineEdit>
#include <QMenu>
#include <QMimeData>
#include <QPointer>
#include <QTabBar>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QTreeWidget>
#include <QWheelEvent>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "tests/editor/editor_test_util.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLS_MONKEY_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MLS_MONKEY_ASAN 1
#endif
#ifdef MLS_MONKEY_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

// The last events, for the report of a crash (ASan's death callback prints them).
std::deque<std::string>& recent_events() {
  static std::deque<std::string> d;
  return d;
}
FILE*& event_log() {
  static FILE* f = nullptr;
  return f;
}

void print_recent_events() {
  std::fprintf(stderr, "\nmonkey: the last %zu events before the crash:\n", recent_events().size());
  for (const std::string& e : recent_events()) std::fprintf(stderr, "  %s\n", e.c_str());
}

// Where two texts first differ, with a little context (a failed undo names what it kept).
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size() && i == b.size()) return "the same";
  const size_t from = i > 200 ? i - 200 : 0;
  return "at byte " + std::to_string(i) + ":\n--- expected\n" + a.substr(from, 400) +
         "\n--- got\n" + b.substr(from, 400);
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return end && *end == 0 ? n : fallback;
}

// The examples the monkey works on: copied into the test's folder (a Save writes there, not
// into resources/), Fashion-MNIST cut to a few hundred images so a run is short.
const char* const kExamples[] = {"two-blobs-logistic.mls", "fashion-mnist-mlp.mls",
                                 "fashion-mnist-resnet.mls", "two-spirals-mlp.mls",
                                 "fashion-mnist-cnn.mls"};

class Monkey {
 public:
  Monkey(EditorFixture& fx, uint64_t seed, std::set<std::string> skip)
      : fx_(fx), rng_(seed), skip_(std::move(skip)) {
    // Dialogs and popups the events open (Save As on an untitled project, Export, a combo
    // box's list) are closed again, so the monkey never waits on a modal loop.
    QObject::connect(&closer_, &QTimer::timeout, [] {
      if (QWidget* m = QApplication::activeModalWidget()) {
        note("  (closing modal " + std::string(m->metaObject()->className()) + ")");
        m->close();
      }
      if (QWidget* p = QApplication::activePopupWidget()) p->close();
    });
    closer_.start(150);
  }

  struct Action {
    const char* name;
    int weight;
    std::string (Monkey::*run)();
  };

  // Opens one of the examples (a copy), cuts its data and epochs (edits on the history) and
  // returns its document's text.
  std::string open_example(int segment) {
    const char* name = kExamples[pick(std::size(kExamples))];
    const std::string copy = fx_.dir.file("seg" + std::to_string(segment) + "-" + name);
    QFile::remove(QString::fromStdString(copy));
    REQUIRE(QFile::copy(QString(MLS_SOURCE_DIR "/resources/examples/") + name,
                        QString::fromStdString(copy)));
    REQUIRE(fx_.window->openFile(QString::fromStdString(copy)).ok());
    DocumentModel* m = fx_.window->model();
    if (m->doc().dataset.source == "fashion-mnist") {
      REQUIRE(
          m->push(nodes::make_set_dataset(m->doc(), {{"limit", 256}, {"test_limit", 64}})).ok());
      REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"batch_size", 32}})).ok());
    }
    REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 1}})).ok());
    REQUIRE(fx_.window->saveTo(QString::fromStdString(copy)).ok());
    fx_.wait_for_data();
    note("open " + copy);
    return m->text();
  }

  // One random event; returns what it did.
  void step(int64_t index) {
    static const Action kActions[] = {
        {"click", 8, &Monkey::click_canvas},
        {"drag", 8, &Monkey::drag_canvas},
        {"move_node", 8, &Monkey::move_node},
        {"wire", 12, &Monkey::wire_ports},
        {"drop", 6, &Monkey::drop_from_palette},
        {"palette", 4, &Monkey::palette_events},
        {"select", 8, &Monkey::select_node},
        {"inspector", 16, &Monkey::type_into_inspector},
        {"toolbar", 6, &Monkey::type_into_toolbar},
        {"shortcut", 12, &Monkey::shortcut},
        {"undo", 8, &Monkey::undo_redo},
        {"wheel", 3, &Monkey::wheel},
        {"tab", 3, &Monkey::switch_tab},
        {"train", 2, &Monkey::train_or_stop},
    };
    int total = 0;
    for (const Action& a : kActions)
      if (!skip_.count(a.name)) total += a.weight;
    REQUIRE(total > 0);
    int r = static_cast<int>(pick(total));
    for (const Action& a : kActions) {
      if (skip_.count(a.name)) continue;
      if (r >= a.weight) {
        r -= a.weight;
        continue;
      }
      note("#" + std::to_string(index) + " " + a.name);
      const std::string what = (this->*a.run)();
      if (!what.empty()) note("    " + what);
      break;
    }
    QTest::qWait(static_cast<int>(pick(3)));
    check_scene_mirrors_model();
  }

  // Stops a run the events started and waits for it to end.
  void stop_training() {
    if (!fx_.window->trainer()->running()) return;
    note("stop training (end of segment)");
    if (QAction* stop = action("&Stop")) stop->trigger();
    for (int i = 0; i < 6000 && fx_.window->trainer()->running(); ++i) QTest::qWait(20);
    REQUIRE_FALSE(fx_.window->trainer()->running());
  }

  static void note(const std::string& line) {
    auto& d = recent_events();
    d.push_back(line);
    if (d.size() > 60) d.pop_front();
    if (FILE* f = event_log()) {
      std::fprintf(f, "%s\n", line.c_str());
      std::fflush(f);
    }
  }

 private:
  uint64_t pick(uint64_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  T* pick_of(const QList<T*>& list) {
    return list.isEmpty() ? nullptr
                          : list[static_cast<qsizetype>(pick(static_cast<uint64_t>(list.size())))];
  }

  QWidget* viewport() { return fx_.window->view()->viewport(); }
  bool canvas_shown() { return viewport()->isVisible(); }

  QPoint random_viewport_point() {
    const QRect r = viewport()->rect();
    return QPoint(static_cast<int>(pick(static_cast<uint64_t>(r.width()))),
                  static_cast<int>(pick(static_cast<uint64_t>(r.height()))));
  }

  // A node on the canvas, scrolled into view.
  NodeItem* random_node() {
    const auto& doc = fx_.window->model()->doc();
    if (doc.nodes.empty()) return nullptr;
    NodeItem* n = fx_.window->scene()->nodeItem(doc.nodes[pick(doc.nodes.size())].id);
    if (n) fx_.window->view()->ensureVisible(n, 10, 10);
    return n;
  }

  static std::string describe(QPoint p) {
    return "(" + std::to_string(p.x()) + "," + std::to_string(p.y()) + ")";
  }

  Qt::KeyboardModifiers random_modifiers() {
    const int r = static_cast<int>(pick(10));
    return r == 0 ? Qt::ShiftModifier : r == 1 ? Qt::ControlModifier : Qt::NoModifier;
  }

  void mouse_drag(QWidget* w, QPoint a, QPoint b, Qt::KeyboardModifiers mods = {}) {
    QTest::mousePress(w, Qt::LeftButton, mods, a);
    const int steps = 1 + static_cast<int>(pick(4));
    for (int i = 1; i <= steps; ++i) QTest::mouseMove(w, a + (b - a) * i / steps);
    QTest::mouseRelease(w, Qt::LeftButton, mods, b);
  }

  std::string click_canvas() {
    if (!canvas_shown()) return "canvas hidden";
    QPoint p = random_viewport_point();
    if (NodeItem* n = chance(0.6) ? random_node() : nullptr)
      p = fx_.view_point(n->scenePos() +
                         QPointF(pick(static_cast<uint64_t>(NodeItem::kWidth)), pick(80)));
    const auto mods = random_modifiers();
    if (chance(0.15))
      QTest::mouseDClick(viewport(), Qt::LeftButton, mods, p);
    else
      QTest::mouseClick(viewport(), chance(0.1) ? Qt::RightButton : Qt::LeftButton, mods, p);
    return "at " + describe(p);
  }

  std::string drag_canvas() {
    if (!canvas_shown()) return "canvas hidden";
    const QPoint a = random_viewport_point(), b = random_viewport_point();
    if (chance(0.2)) {  // the middle button pans
      QTest::mousePress(viewport(), Qt::MiddleButton, {}, a);
      QTest::mouseMove(viewport(), b);
      QTest::mouseRelease(viewport(), Qt::MiddleButton, {}, b);
      return "pan " + describe(a) + " -> " + describe(b);
    }
    mouse_drag(viewport(), a, b, random_modifiers());
    return describe(a) + " -> " + describe(b);
  }

  std::string move_node() {
    if (!canvas_shown()) return "canvas hidden";
    NodeItem* n = random_node();
    if (!n) return "no node";
    const std::string id = n->id();
    const QPoint a = fx_.view_point(n->scenePos() + QPointF(40, 10));
    const QPoint b =
        a + QPoint(static_cast<int>(pick(400)) - 200, static_cast<int>(pick(300)) - 150);
    mouse_drag(viewport(), a, b);
    return id + " " + describe(a) + " -> " + describe(b);
  }

  // From a port (mostly an output) to a port of another node (mostly an input), or to nowhere.
  std::string wire_ports() {
    if (!canvas_shown()) return "canvas hidden";
    NodeItem* from = random_node();
    NodeItem* to = random_node();
    if (!from || !to || !from->def() || !to->def()) return "no node";
    const bool out = chance(0.85);
    const auto& from_ports = out ? from->def()->outputs : from->def()->inputs;
    const auto& to_ports = out ? to->def()->inputs : to->def()->outputs;
    if (from_ports.empty()) return "no port";
    const std::string fp = from_ports[pick(from_ports.size())].name;
    const QPointF a = from->portScenePos(out, fp);
    QPointF b = fx_.window->view()->mapToScene(random_viewport_point());
    std::string tp = "nowhere";
    if (!to_ports.empty() && chance(0.9)) {
      tp = to_ports[pick(to_ports.size())].name;
      b = to->portScenePos(!out, tp);
    }
    fx_.window->view()->centerOn((a + b) / 2);
    mouse_drag(viewport(), fx_.view_point(a), fx_.view_point(b));
    return from->id() + ":" + fp + " -> " + (tp == "nowhere" ? tp : to->id() + ":" + tp);
  }

  // What a drag from the palette delivers to the canvas: enter, move, drop (or no drop).
  std::string drop_from_palette() {
    if (!canvas_shown()) return "canvas hidden";
    const QStringList types = fx_.window->palette()->visibleTypes();
    if (types.isEmpty()) return "palette filtered to nothing";
    const QString type = types[static_cast<qsizetype>(pick(static_cast<uint64_t>(types.size())))];
    std::unique_ptr<QMimeData> mime(fx_.window->palette()->mimeFor(type.toStdString()));
    const QPoint at = random_viewport_point();
    QDragEnterEvent enter(at, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(viewport(), &enter);
    QDragMoveEvent move(at, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(viewport(), &move);
    if (chance(0.1)) return type.toStdString() + " not dropped";
    QDropEvent drop(at, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(viewport(), &drop);
    return type.toStdString() + " at " + describe(at);
  }

  // Typing into the palette's search, or double-clicking an entry (adds it at the centre).
  std::string palette_events() {
    Palette* pal = fx_.window->palette();
    if (chance(0.5)) {
      pal->search()->setFocus();
      QTest::keyClick(pal->search(), Qt::Key_A, Qt::ControlModifier);
      QString text;
      if (chance(0.7)) {
        static const char* words[] = {"re", "lin", "conv", "x", "loss", "norm", "", "add", "zz"};
        text = words[pick(std::size(words))];
      }
      QTest::keyClick(pal->search(), Qt::Key_Backspace);
      QTest::keyClicks(pal->search(), text);
      return "search '" + text.toStdString() + "'";
    }
    QTreeWidget* tree = pal->tree();
    std::vector<QTreeWidgetItem*> leaves;
    for (QTreeWidgetItemIterator it(tree); *it; ++it)
      if ((*it)->childCount() == 0 && !(*it)->isHidden()) leaves.push_back(*it);
    if (leaves.empty()) return "no entries";
    QTreeWidgetItem* item = leaves[pick(leaves.size())];
    tree->scrollToItem(item);
    const QRect r = tree->visualItemRect(item);
    if (!r.isValid()) return "entry not shown";
    QTest::mouseDClick(tree->viewport(), Qt::LeftButton, {}, r.center());
    return "double-click " + item->text(0).toStdString();
  }

  std::string select_node() {
    if (!canvas_shown()) return "canvas hidden";
    if (chance(0.2)) {
      fx_.window->scene()->clearSelection();
      QTest::mouseClick(viewport(), Qt::LeftButton, {}, QPoint(3, 3));
      return "none (project settings)";
    }
    NodeItem* n = random_node();
    if (!n) return "no node";
    const std::string id = n->id();
    QTest::mouseClick(viewport(), Qt::LeftButton, {},
                      fx_.view_point(n->scenePos() + QPointF(30, 8)));
    return id;
  }

  // Random keys into a field: digits, letters, signs, Enter, Tab, arrows, page keys, deletes.
  std::string type_keys(QWidget* w) {
    QPointer<QWidget> guard(w);
    std::string typed;
    const int n = 1 + static_cast<int>(pick(8));
    for (int i = 0; i < n && guard && guard->isVisible(); ++i) {
      const int k = static_cast<int>(pick(20));
      if (k < 6) {
        const char c = static_cast<char>('0' + pick(10));
        QTest::keyClick(guard, c);
        typed += c;
      } else if (k < 8) {
        const char c = static_cast<char>('a' + pick(26));
        QTest::keyClick(guard, c);
        typed += c;
      } else if (k == 8) {
        const char c = ".-e+,"[pick(5)];
        QTest::keyClick(guard, c);
        typed += c;
      } else {
        static const std::pair<Qt::Key, const char*> keys[] = {
            {Qt::Key_Return, "<Enter>"}, {Qt::Key_Enter, "<KpEnter>"},
            {Qt::Key_Tab, "<Tab>"},      {Qt::Key_Backtab, "<Backtab>"},
            {Qt::Key_Up, "<Up>"},        {Qt::Key_Down, "<Down>"},
            {Qt::Key_PageUp, "<PgUp>"},  {Qt::Key_PageDown, "<PgDn>"},
            {Qt::Key_Backspace, "<BS>"}, {Qt::Key_Delete, "<Del>"},
            {Qt::Key_Home, "<Home>"},    {Qt::Key_End, "<End>"},
            {Qt::Key_Escape, "<Esc>"},   {Qt::Key_Space, "<Space>"},
        };
        const auto& [key, name] = keys[pick(std::size(keys))];
        if (k == 19 && chance(0.5)) {
          QTest::keyClick(guard, Qt::Key_A, Qt::ControlModifier);
          typed += "<Ctrl+A>";
        } else {
          QTest::keyClick(guard, key);
          typed += name;
        }
      }
    }
    if (!guard) typed += " (field deleted)";
    return typed;
  }

  // A field: click it (a spin box's arrows, a check box, a combo box's list), then type.
  std::string work_field(QWidget* w, const std::string& where) {
    QPointer<QWidget> guard(w);
    const std::string name =
        where + " " + w->metaObject()->className() + " '" + w->objectName().toStdString() + "'";
    if (auto* spin = qobject_cast<QAbstractSpinBox*>(w); spin && chance(0.3)) {
      // The arrows: the top or bottom of the button column at the right edge.
      const bool up = chance(0.5);
      const QPoint p(spin->width() - 6, up ? 4 : spin->height() - 4);
      const int clicks = 1 + static_cast<int>(pick(3));
      for (int i = 0; i < clicks && guard; ++i) QTest::mouseClick(guard, Qt::LeftButton, {}, p);
      return name + (up ? " arrow up x" : " arrow down x") + std::to_string(clicks) +
             (guard ? "" : " (field deleted)");
    }
    if (qobject_cast<QCheckBox*>(w) && chance(0.6)) {
      QTest::mouseClick(w, Qt::LeftButton, {}, QPoint(6, w->height() / 2));
      return name + " clicked" + (guard ? "" : " (field deleted)");
    }
    if (qobject_cast<QComboBox*>(w) && chance(0.2)) {
      QTest::mouseClick(w, Qt::LeftButton, {}, w->rect().center());
      if (QWidget* popup = QApplication::activePopupWidget()) {
        QTest::keyClick(popup, chance(0.5) ? Qt::Key_Down : Qt::Key_Up);
        QTest::keyClick(popup, chance(0.8) ? Qt::Key_Return : Qt::Key_Escape);
      }
      return name + " list" + (guard ? "" : " (field deleted)");
    }
    QTest::mouseClick(w, Qt::LeftButton, {}, QPoint(w->width() / 3, w->height() / 2));
    if (!guard) return name + " deleted by a click";
    return name + " typed " + type_keys(guard);
  }

  static QList<QWidget*> fields(QWidget* root) {
    QList<QWidget*> out;
    for (QWidget* w : root->findChildren<QWidget*>()) {
      if (!w->isVisible() || !w->isEnabled()) continue;
      // A spin box's own line edit is reached through the spin box.
      if (qobject_cast<QLineEdit*>(w) && qobject_cast<QAbstractSpinBox*>(w->parentWidget()))
        continue;
      if (qobject_cast<QLineEdit*>(w) && qobject_cast<QComboBox*>(w->parentWidget())) continue;
      if (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QLineEdit*>(w) ||
          qobject_cast<QComboBox*>(w) || qobject_cast<QCheckBox*>(w))
        out.push_back(w);
    }
    return out;
  }

  std::string type_into_inspector() {
    // Mostly with a node selected: its parameters; else the project's settings.
    if (chance(0.25) && canvas_shown()) (void)select_node();
    QList<QWidget*> f = fields(fx_.window->inspector());
    QWidget* w = pick_of(f);
    if (!w) return "no field";
    return work_field(w, "inspector(" + fx_.window->inspector()->nodeId() + ")");
  }

  std::string type_into_toolbar() {
    QList<QWidget*> f;
    for (QToolBar* tb : fx_.window->findChildren<QToolBar*>()) f += fields(tb);
    QWidget* w = pick_of(f);
    if (!w) return "no field";
    return work_field(w, "toolbar");
  }

  QAction* action(const QString& text) {
    for (QAction* a : fx_.window->findChildren<QAction*>())
      if (a->text() == text) return a;
    return nullptr;
  }

  // Keys the window and the canvas answer. Not Quit, Open or New: they end the segment.
  std::string shortcut() {
    struct Key {
      Qt::Key key;
      Qt::KeyboardModifiers mods;
      const char* name;
    };
    static const Key keys[] = {
        {Qt::Key_Delete, {}, "Delete"},
        {Qt::Key_Backspace, {}, "Backspace"},
        {Qt::Key_C, Qt::ControlModifier, "Ctrl+C"},
        {Qt::Key_V, Qt::ControlModifier, "Ctrl+V"},
        {Qt::Key_X, Qt::ControlModifier, "Ctrl+X"},
        {Qt::Key_A, Qt::ControlModifier, "Ctrl+A"},
        {Qt::Key_L, Qt::ControlModifier, "Ctrl+L (auto-layout)"},
        {Qt::Key_0, Qt::ControlModifier, "Ctrl+0 (fit)"},
        {Qt::Key_Plus, Qt::ControlModifier, "Ctrl++"},
        {Qt::Key_Minus, Qt::ControlModifier, "Ctrl+-"},
        {Qt::Key_M, Qt::ControlModifier | Qt::ShiftModifier, "Ctrl+Shift+M (frame)"},
        {Qt::Key_1, Qt::ControlModifier, "Ctrl+1"},
        {Qt::Key_2, Qt::ControlModifier, "Ctrl+2"},
        {Qt::Key_3, Qt::ControlModifier, "Ctrl+3"},
        {Qt::Key_4, Qt::ControlModifier, "Ctrl+4"},
        {Qt::Key_S, Qt::ControlModifier, "Ctrl+S"},
        {Qt::Key_F, Qt::ControlModifier, "Ctrl+F"},
        {Qt::Key_E, Qt::ControlModifier, "Ctrl+E (export dialog)"},
        {Qt::Key_Space, {}, "Space"},
        {Qt::Key_Escape, {}, "Escape"},
    };
    const Key& k = keys[pick(std::size(keys))];
    QWidget* target = canvas_shown() && chance(0.8) ? static_cast<QWidget*>(fx_.window->view())
                                                    : static_cast<QWidget*>(fx_.window.get());
    target->setFocus();
    QTest::keyClick(target, k.key, k.mods);
    return k.name;
  }

  std::string undo_redo() {
    QWidget* target = canvas_shown() ? static_cast<QWidget*>(fx_.window->view())
                                     : static_cast<QWidget*>(fx_.window.get());
    target->setFocus();
    const int r = static_cast<int>(pick(10));
    const int times = 1 + static_cast<int>(pick(4));
    for (int i = 0; i < times; ++i) {
      if (r < 6)
        QTest::keyClick(target, Qt::Key_Z, Qt::ControlModifier);
      else if (r < 9)
        QTest::keyClick(target, Qt::Key_Z, Qt::ControlModifier | Qt::ShiftModifier);
      else
        QTest::keyClick(target, Qt::Key_Y, Qt::ControlModifier);
    }
    return std::string(r < 6 ? "undo" : "redo") + " x" + std::to_string(times);
  }

  std::string wheel() {
    if (!canvas_shown()) return "canvas hidden";
    const QPoint at = random_viewport_point();
    const int delta = (chance(0.5) ? 120 : -120) * (1 + static_cast<int>(pick(3)));
    const auto mods = chance(0.2) ? Qt::ShiftModifier : Qt::NoModifier;
    QWheelEvent e(at, viewport()->mapToGlobal(at), QPoint(), QPoint(0, delta), Qt::NoButton, mods,
                  Qt::NoScrollPhase, false);
    QApplication::sendEvent(viewport(), &e);
    return std::to_string(delta) + " at " + describe(at);
  }

  // A tab of the centre (the model, the training step, the instruments) or of a dock.
  std::string switch_tab() {
    QList<QTabBar*> bars;
    for (QTabBar* b : fx_.window->findChildren<QTabBar*>())
      if (b->isVisible() && b->count() > 1) bars.push_back(b);
    QTabBar* bar = pick_of(bars);
    if (!bar) return "no tab bar";
    // Mostly back to the first tab (the model), where most events act.
    const int i = chance(0.5) ? 0 : static_cast<int>(pick(static_cast<uint64_t>(bar->count())));
    if (skip_.count("instruments") && bar->tabText(i) == "Instruments")
      return "(instruments skipped)";
    QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(i).center());
    return bar->tabText(i).toStdString();
  }

  // The run toolbar's buttons: Train, Pause, Stop, clicked when enabled.
  std::string train_or_stop() {
    static const char* const names[] = {"&Train", "&Train", "&Pause", "&Stop", "&Stop"};
    const char* name = names[pick(std::size(names))];
    QAction* a = action(name);
    if (!a) return std::string("no action ") + name;
    for (QToolBar* tb : fx_.window->findChildren<QToolBar*>())
      if (QWidget* b = tb->widgetForAction(a); b && b->isVisible() && b->isEnabled()) {
        QTest::mouseClick(b, Qt::LeftButton, {}, b->rect().center());
        return std::string(name) + " clicked" +
               (fx_.window->trainer()->running() ? " (running)" : "");
      }
    return std::string(name) + " disabled";
  }

  // The canvas mirrors the document after every event: one item per node, one wire per link.
  void check_scene_mirrors_model() {
    const nodes::Document& doc = fx_.window->model()->doc();
    int node_items = 0;
    for (QGraphicsItem* it : fx_.window->scene()->items())
      if (it->type() == NodeItem::Type) ++node_items;
    if (node_items != static_cast<int>(doc.nodes.size()) ||
        fx_.window->scene()->wires().size() != doc.links.size()) {
      print_recent_events();
      CHECK(node_items == static_cast<int>(doc.nodes.size()));
      CHECK(fx_.window->scene()->wires().size() == doc.links.size());
      FAIL("the canvas no longer mirrors the document");
    }
  }

  EditorFixture& fx_;
  std::mt19937_64 rng_;
  std::set<std::string> skip_;
  QTimer closer_;
};

struct MonkeyRun {
  int64_t events = 0;
  int segments = 0;
};

// Runs `events` events (or until `seconds` have passed, if > 0) in segments of `segment`
// events, each on an example picked by the seed; after each the history must undo to the
// document as opened and redo to the document as left.
MonkeyRun run_monkey(uint64_t seed, int64_t events, double seconds, int64_t segment) {
  EditorFixture fx;
  std::set<std::string> skip;
  if (const char* s = std::getenv("MLS_MONKEY_SKIP")) {
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) skip.insert(item);
  }
  if (const char* path = std::getenv("MLS_MONKEY_LOG")) event_log() = std::fopen(path, "w");
#ifdef MLS_MONKEY_ASAN
  __sanitizer_set_death_callback(print_recent_events);
#endif
  recent_events().clear();
  Monkey monkey(fx, seed, skip);
  Monkey::note("seed " + std::to_string(seed) + ", " + std::to_string(events) + " events");
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  MonkeyRun run;
  while (run.events < events && (seconds <= 0 || elapsed() < seconds)) {
    const std::string opened = monkey.open_example(run.segments);
    const int base = fx.window->model()->undoStack()->index();  // after the setup's edits
    const int64_t first = run.events;
    for (; run.events < events && run.events - first < segment &&
           (seconds <= 0 || elapsed() < seconds);
         ++run.events)
      monkey.step(run.events);
    monkey.stop_training();
    QTest::qWait(50);  // queued frame commits
    DocumentModel* m = fx.window->model();
    QUndoStack* stack = m->undoStack();
    const std::string left = m->text();
    INFO("seed " << seed << ", segment " << run.segments << ", events " << first << ".."
                 << run.events);
    Monkey::note("undo " + std::to_string(stack->index() - base) + " steps");
    stack->setIndex(base);
    {
      INFO("undone to the start: " << first_difference(opened, m->text()));
      CHECK(m->text() == opened);
    }
    stack->setIndex(stack->count());
    INFO("redone to the end: " << first_difference(left, m->text()));
    CHECK(m->text() == left);
    ++run.segments;
  }
  Monkey::note("done: " + std::to_string(run.events) + " events in " + std::to_string(elapsed()) +
               " s");
  if (FILE* f = event_log()) std::fclose(f), event_log() = nullptr;
  return run;
}

}  // namespace

TEST_CASE("the monkey: seeded random input events on the main window", "[editor][monkey]") {
  // `make test` runs scripts/monkey (seed 24, 2000 events under ASan) too: the plain build's
  // run takes another seed, so the two cover different events instead of one prefix twice.
  const uint64_t seed = static_cast<uint64_t>(env_int("MLS_MONKEY_SEED", 7));
  const int64_t events = env_int("MLS_MONKEY_EVENTS", 1200);
  const double seconds = static_cast<double>(env_int("MLS_MONKEY_SECONDS", 0));
  const MonkeyRun run = run_monkey(seed, events, seconds, env_int("MLS_MONKEY_SEGMENT", 500));
  INFO("seed " << seed);
  CHECK(run.events == (seconds > 0 ? run.events : events));
  CHECK(run.segments >= 1);
  std::printf("monkey: seed %llu, %lld events in %d segments\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(run.events),
              run.segments);
}

// Found by the monkey (seed 24, event 706, under ASan/UBSan): the first time the Instruments
// tab shows, Dear ImGui's OpenGL 3 backend initialised with the loader Debian's imgui 1.86
// ships, which stores 54 function pointers into a 53-slot array (one write past a global). The
// normal build does not notice; scripts/monkey's build (UBSan bounds, ASan) stops here.
TEST_CASE("monkey regression: showing the Instruments tab initialises OpenGL in bounds",
          "[editor][monkey][regression]") {
  EditorFixture fx;
  fx.open_example("two-blobs-logistic.mls");
  QTabBar* bar = nullptr;
  int index = -1;
  for (QTabBar* b : fx.window->findChildren<QTabBar*>())
    for (int i = 0; i < b->count(); ++i)
      if (b->tabText(i) == "Instruments") bar = b, index = i;
  REQUIRE(bar);
  QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(index).center());
  QTest::qWait(100);  // painted
  CHECK(fx.window->instruments()->isVisible());
  QTest::mouseClick(bar, Qt::LeftButton, {}, bar->tabRect(0).center());
  CHECK(fx.window->view()->isVisible());
}
