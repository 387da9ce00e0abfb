// The Lua console: a REPL on the same `mls` module as `mlstudio lua`, inside the editor.
// `mls.project.current()` is the open project, so a script's edits land on the canvas and
// on the undo stack. Entries run on the GUI thread (the document is the GUI's).
#pragma once

#include <QLineEdit>
#include <QPlainTextEdit>
#include <QStringList>
#include <QWidget>
#include <memory>

#include "editor/document_model.h"
#include "scripting/lua_host.h"

namespace mls::editor {

class ConsoleInput : public QLineEdit {
  Q_OBJECT
 public:
  using QLineEdit::QLineEdit;
 Q_SIGNALS:
  void historyUp();
  void historyDown();
  void complete();

 protected:
  void keyPressEvent(QKeyEvent* e) override;
  bool focusNextPrevChild(bool) override { return false; }  // Tab completes
};

class ConsoleWidget : public QWidget {
  Q_OBJECT
 public:
  explicit ConsoleWidget(DocumentModel* model, QWidget* parent = nullptr);
  ~ConsoleWidget() override;
  // Runs one entry as if typed (Enter); returns what was appended to the output.
  QString submit(const QString& line);
  QPlainTextEdit* output() const { return output_; }
  ConsoleInput* input() const { return input_; }
  void appendOutput(const QString& text, const QColor& color = QColor());
  const QStringList& history() const { return history_; }

 private:
  DocumentModel* model_;
  std::unique_ptr<lua::LuaHost> host_;
  QPlainTextEdit* output_;
  ConsoleInput* input_;
  QStringList history_;
  int history_pos_ = 0;
  QString pending_;  // an incomplete entry waiting for more lines
  QString captured_;
  friend int console_print(struct lua_State*);
};

}  // namespace mls::editor
