// The notebook in the editor, driven as a person would: keys typed into the cells, clicks on
// the toolbar and on the widgets under a cell (QTest events, never values set from code).
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSvgRenderer>
#include <QSvgWidget>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextLayout>

#include "editor/cell_widget.h"
#include "editor/lua_highlighter.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;

namespace {

// Types text as keys; a newline is the Return key (QTest::keyClicks has none for it).
void type(QWidget* w, const QString& text) {
  const QStringList lines = text.split('\n');
  for (int i = 0; i < lines.size(); ++i) {
    if (i > 0) QTest::keyClick(w, Qt::Key_Return);
    QTest::keyClicks(w, lines[i]);
  }
}

// The highlighter's format at a position of a line of the document.
QTextCharFormat format_at(QTextDocument* doc, int line, int col) {
  const QTextBlock b = doc->findBlockByNumber(line);
  for (const auto& r : b.layout()->formats())
    if (col >= r.start && col < r.start + r.length) return r.format;
  return {};
}

bool is(QTextDocument* doc, LuaHighlighter* h, int line, int col, LuaHighlighter::Kind k) {
  return format_at(doc, line, col).foreground() == h->format_of(k).foreground();
}

}  // namespace

TEST_CASE(
    "the Lua highlighter marks keywords, strings, long brackets, comments, numbers and mls names",
    "[editor][notebook]") {
  test::qt_app();
  CodeEdit edit;
  edit.show();
  edit.setFocus();
  type(&edit,
       "local x = mls.plot.line{y = 1.5e3} -- note\n"
       "s = [==[ open\n"
       "still ]==] y = 'q' 0x1F\n"
       "--[[ a\n"
       "b ]] while");
  QTextDocument* doc = edit.document();
  LuaHighlighter* h = edit.highlighter();
  using K = LuaHighlighter::Kind;
  CHECK(is(doc, h, 0, 0, K::Keyword));        // local
  CHECK_FALSE(is(doc, h, 0, 6, K::Keyword));  // x
  CHECK(is(doc, h, 0, 10, K::MlsName));       // mls
  CHECK(is(doc, h, 0, 18, K::MlsName));       // line (mls.plot.line)
  CHECK(is(doc, h, 0, 29, K::Number));        // 1.5e3
  CHECK(is(doc, h, 0, 36, K::Comment));       // -- note
  CHECK(is(doc, h, 1, 6, K::String));         // [==[ opens
  CHECK(is(doc, h, 2, 0, K::String));         // still inside it
  CHECK_FALSE(is(doc, h, 2, 11, K::String));  // y after ]==]
  CHECK(is(doc, h, 2, 15, K::String));        // 'q'
  CHECK(is(doc, h, 2, 19, K::Number));        // 0x1F
  CHECK(is(doc, h, 3, 0, K::Comment));        // --[[
  CHECK(is(doc, h, 4, 0, K::Comment));        // b, still in the comment
  CHECK(is(doc, h, 4, 5, K::Keyword));        // while after ]]
}

TEST_CASE("a code cell matches brackets, completes mls names with Tab and runs with Shift+Enter",
          "[editor][notebook]") {
  test::qt_app();
  CellWidget w({.id = "a", .source = ""});
  w.setCompletions([](const std::string& prefix) {
    std::vector<std::string> all = {"mls.plot.line", "mls.plot.hist", "mls.randn"}, hits;
    for (auto& s : all)
      if (s.rfind(prefix, 0) == 0) hits.push_back(s);
    return hits;
  });
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  CodeEdit* e = w.editor();
  e->setFocus();
  QSignalSpy edited(&w, &CellWidget::sourceEdited), run(&w, &CellWidget::runRequested);
  QTest::keyClicks(e, "x = mls.ra");
  QTest::keyClick(e, Qt::Key_Tab);
  CHECK(e->toPlainText() == "x = mls.randn");
  QTest::keyClicks(e, "{2, (3)}");
  // The cursor sits after the closing brace: it and the opening one are matched.
  CHECK(e->matchedBrackets() == std::pair<int, int>{20, 13});
  QTest::keyClick(e, Qt::Key_Home);
  CHECK(e->matchedBrackets() == std::pair<int, int>{-1, -1});
  CHECK(!edited.isEmpty());
  CHECK(edited.back().at(1).toString() == "x = mls.randn{2, (3)}");
  CHECK(w.cell().source == "x = mls.randn{2, (3)}");
  QTest::keyClick(e, Qt::Key_Return, Qt::ShiftModifier);
  REQUIRE(run.size() == 1);
  CHECK(run[0].at(0).toString() == "a");
  CHECK(e->toPlainText() == "x = mls.randn{2, (3)}");  // Shift+Enter adds no line
}

TEST_CASE(
    "a cell shows its text, figures, widgets and its error with the line marked, greyed when stale",
    "[editor][notebook]") {
  test::qt_app();
  CellWidget w({.id = "plot", .source = "lr = mls.ui.slider('lr')\nerror('boom')"});
  w.resize(700, 500);
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  lua::CellOutput out;
  out.cell_id = "plot";
  out.text = "hello\n";
  out.figures.push_back({.svg = "<svg xmlns='http://www.w3.org/2000/svg' width='64' height='32'>"
                                "<rect width='64' height='32' fill='red'/></svg>",
                         .title = "loss",
                         .width = 64,
                         .height = 32});
  out.widgets.push_back({.kind = "slider",
                         .name = "lr",
                         .label = "rate",
                         .min = 0,
                         .max = 1,
                         .step = 0.25,
                         .value = 0.5});
  out.widgets.push_back({.kind = "checkbox", .name = "flag", .value = false});
  out.widgets.push_back({.kind = "button", .name = "go", .label = "Go", .value = 2});
  out.ok = false;
  out.error = "boom";
  out.error_line = 2;
  w.setOutput(&out, false);
  QApplication::processEvents();
  CHECK(w.outputText()->text() == "hello");
  CHECK(w.outputText()->isVisible());
  const auto figures = w.findChildren<QSvgWidget*>("cell.figure");
  REQUIRE(figures.size() == 1);
  CHECK(figures[0]->renderer()->isValid());
  CHECK(w.errorLabel()->text() == "line 2: boom");
  CHECK(w.editor()->errorLine() == 2);
  CHECK_FALSE(w.staleLabel()->isVisible());

  QSignalSpy changed(&w, &CellWidget::widgetChanged);
  auto* slider = w.findChild<QSlider*>("widget.lr");
  REQUIRE(slider);
  CHECK(slider->value() == 2);  // 0.5 in steps of 0.25
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Right);
  QTRY_COMPARE(changed.size(), 1);
  CHECK(changed[0].at(0).toString() == "lr");
  CHECK(changed[0].at(1).value<nlohmann::json>() == 0.75);
  auto* check = w.findChild<QCheckBox*>("widget.flag");
  REQUIRE(check);
  QTest::mouseClick(check, Qt::LeftButton, {}, QPoint(8, check->height() / 2));
  REQUIRE(changed.size() == 2);
  CHECK(changed[1].at(1).value<nlohmann::json>() == true);
  auto* button = w.findChild<QPushButton*>("widget.go");
  REQUIRE(button);
  QTest::mouseClick(button, Qt::LeftButton);
  REQUIRE(changed.size() == 3);
  CHECK(changed[2].at(1).value<nlohmann::json>() == 3);

  // An edit clears the error's mark; the old output is stale.
  w.editor()->setFocus();
  QTest::keyClick(w.editor(), Qt::Key_End, Qt::ControlModifier);
  QTest::keyClicks(w.editor(), " -- fixed");
  CHECK(w.editor()->errorLine() == 0);
  w.setStale(true);
  CHECK(w.staleLabel()->isVisible());
  CHECK(w.stale());
}

TEST_CASE("a Markdown cell is rendered, edited on double-click and rendered again on Shift+Enter",
          "[editor][notebook]") {
  test::qt_app();
  CellWidget w(
      {.id = "intro", .kind = nodes::CellKind::Markdown, .source = "# Tour\n\n- one\n- two"});
  w.resize(600, 300);
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  QTextBrowser* md = w.markdown();
  CHECK(md->isVisible());
  CHECK_FALSE(w.editor()->isVisible());
  CHECK(md->document()->findBlockByNumber(0).text() == "Tour");
  CHECK(md->document()->findBlockByNumber(0).blockFormat().headingLevel() == 1);
  CHECK(md->document()->findBlockByNumber(1).textList() != nullptr);
  QTest::mouseDClick(md->viewport(), Qt::LeftButton, {}, QPoint(20, 10));
  REQUIRE(w.editingMarkdown());
  QTest::keyClick(w.editor(), Qt::Key_End, Qt::ControlModifier);
  type(w.editor(), "\n\n**bold**");
  QTest::keyClick(w.editor(), Qt::Key_Return, Qt::ShiftModifier);
  CHECK_FALSE(w.editingMarkdown());
  CHECK(w.cell().source == "# Tour\n\n- one\n- two\n\n**bold**");
  CHECK(md->toPlainText().contains("bold"));
  CHECK_FALSE(md->toPlainText().contains("**"));
}
