// One notebook cell as the notebook view shows it: a code cell's editor (Lua highlighting,
// bracket matching, completion of mls names, Shift+Enter runs it, the error's line marked),
// a Markdown cell rendered (double-click edits it, Shift+Enter or leaving renders it again),
// a view cell's title, and under each its output: text, tables (a returned tensor's values,
// a model's summary: read-only, scrollable, at most 12 rows high), figures (SVG, keeping
// their aspect ratio), widgets, the error, greyed with "stale" when its code or inputs
// changed since, and the notebook's problems that name it.
//
//   auto* w = new CellWidget({.id = "a", .source = "x = 1"});
//   connect(w, &CellWidget::runRequested, ...);      // Shift+Enter
//   connect(w, &CellWidget::sourceEdited, ...);      // after each edit
//   w->setOutput(*session.output("a"), session.stale("a"));
#pragma once

#include <QFrame>
#include <QPlainTextEdit>
#include <QStringList>
#include <QSvgWidget>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "nodes/notebook.h"
#include "scripting/notebook/cell_output.h"

class QLabel;
class QTextBrowser;
class QVBoxLayout;

namespace mls::editor {

class LuaHighlighter;

// The code editor of a Lua cell.
class CodeEdit : public QPlainTextEdit {
  Q_OBJECT
 public:
  explicit CodeEdit(QWidget* parent = nullptr);
  // The names Tab completes from (LuaHost::completions for the word before the cursor).
  std::function<std::vector<std::string>(const std::string& prefix)> completions;
  // Marks a line (1-based) as the error's; 0 clears it.
  void markErrorLine(int line);
  int errorLine() const { return error_line_; }
  // Where the bracket at or before the cursor and its partner are (-1: none).
  std::pair<int, int> matchedBrackets() const { return matched_; }
  LuaHighlighter* highlighter() const { return highlighter_; }
  // Fits its height to its lines (a notebook cell: the notebook scrolls). Off: it takes
  // the height its layout gives it and scrolls itself (a Lua file's tab).
  QSize sizeHint() const override;
  void setFitToLines(bool fit);

 Q_SIGNALS:
  void runRequested();  // Shift+Enter
  void focusLost();

 protected:
  void keyPressEvent(QKeyEvent* e) override;
  void focusOutEvent(QFocusEvent* e) override;

 private:
  void updateSelections();
  void complete();
  LuaHighlighter* highlighter_;
  int error_line_ = 0;
  std::pair<int, int> matched_{-1, -1};
  bool fit_to_lines_ = true;
};

// A figure under a cell: the SVG drawn at the widget's width with the figure's own aspect
// ratio (Qt 6.4's QSvgWidget stretches it to the widget's shape), never wider than the SVG
// itself; its height follows its width.
class FigureWidget : public QSvgWidget {
  Q_OBJECT
 public:
  explicit FigureWidget(const lua::Figure& f, QWidget* parent = nullptr);
  double aspectRatio() const { return ratio_; }  // height / width of the SVG
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int w) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  int width_, height_;
  double ratio_;
};

class CellWidget : public QFrame {
  Q_OBJECT
 public:
  explicit CellWidget(const nodes::Cell& cell, QWidget* parent = nullptr);
  const nodes::Cell& cell() const { return cell_; }
  // The cell changed in the document (undo, an edit elsewhere): shown, the editor's text
  // kept when it already matches (so the cursor stays).
  void setCell(const nodes::Cell& cell);
  void setOutput(const lua::CellOutput* out, bool stale);
  void setStale(bool stale);
  void setProblems(const QStringList& reasons);
  void setRunning(bool running);
  // For Markdown images: the project's folder.
  void setBaseDir(const QString& dir);
  // A view cell's live view of the project (the cell owns it).
  void setViewWidget(QWidget* w);
  QWidget* viewWidget() const { return view_; }
  void setCompletions(std::function<std::vector<std::string>(const std::string&)> f);
  // A lab's locked cell in a student's copy (nodes/lab.h): its text cannot be edited (the
  // document's commands refuse it too); the title says so.
  void setLocked(bool locked);
  bool locked() const { return locked_; }

  CodeEdit* editor() const { return edit_; }
  QTextBrowser* markdown() const { return rendered_; }
  QLabel* outputText() const { return text_; }
  QLabel* errorLabel() const { return error_; }
  QLabel* problemLabel() const { return problems_; }
  QLabel* staleLabel() const { return stale_; }
  QWidget* outputArea() const { return outputs_; }
  bool stale() const { return stale_shown_; }
  bool editingMarkdown() const;

 Q_SIGNALS:
  void runRequested(const QString& id);
  void sourceEdited(const QString& id, const QString& source);
  void selected(const QString& id);
  // A widget under the cell was moved: its global's new value.
  void widgetChanged(const QString& name, const nlohmann::json& value);

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  void showMarkdown(bool edit);
  void fitMarkdown();  // the rendered text's height at the cell's width
  void clearOutputs();
  QWidget* makeWidget(const lua::Widget& w);
  QWidget* makeTable(const lua::Table& t);

  nodes::Cell cell_;
  QString base_dir_;
  QLabel* title_ = nullptr;
  QWidget* view_ = nullptr;
  CodeEdit* edit_ = nullptr;
  QTextBrowser* rendered_ = nullptr;
  QWidget* outputs_ = nullptr;
  QVBoxLayout* outputs_layout_ = nullptr;
  QLabel* text_ = nullptr;
  QLabel* error_ = nullptr;
  QLabel* problems_ = nullptr;
  QLabel* stale_ = nullptr;
  bool stale_shown_ = false;
  bool setting_ = false;
  bool locked_ = false;
  std::optional<lua::CellOutput> shown_output_;  // what the output area shows
};

}  // namespace mls::editor
