// The Lua console: a REPL on the same `mls` module as `mlstudio lua`, inside the editor.
// `mls.project.current()` is the open project, so a script's edits land on the canvas and
// on the undo stack. Each entry runs on a worker thread, so a long one (an mls.train, a
// loop) leaves the window responsive; print() and mls.train's lines appear as they come,
// and Stop (or Esc in the input) interrupts it. The document is edited on the GUI thread
// through GuiThreadHistory.
//
//   console->run("mls.train{...}");       // returns at once; entryFinished() follows
//   console->interrupt();                 // "interrupted (stopped by the user)"
//   QString out = console->submit("1+1"); // runs and waits (the event loop serves): "2"
#pragma once

#include <QFutureWatcher>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QStringList>
#include <QWidget>
#include <atomic>
#include <memory>

#include "editor/document_model.h"
#include "engine/train/telemetry.h"
#include "editor/gui_thread_history.h"
#include "scripting/lua_host.h"

class QToolButton;

namespace mls::editor {

class ConsoleInput : public QLineEdit {
  Q_OBJECT
 public:
  using QLineEdit::QLineEdit;
 Q_SIGNALS:
  void historyUp();
  void historyDown();
  void complete();
  void escape();

 protected:
  void keyPressEvent(QKeyEvent* e) override;
  bool focusNextPrevChild(bool) override { return false; }  // Tab completes
};

// Appends `text` to a console's output as a line of its own (in `color` when given) and
// scrolls to it; the console and the script editor's output pane both write through it.
void append_output(QPlainTextEdit* output, const QString& text, const QColor& color = QColor());

class ConsoleWidget : public QWidget {
  Q_OBJECT
 public:
  // Runs started with mls.train are recorded in `db_path` (the editor's run store).
  explicit ConsoleWidget(DocumentModel* model, const std::string& db_path = "mlstudio-runs.db",
                         QWidget* parent = nullptr);
  ~ConsoleWidget() override;
  // Starts one entry as if typed (Enter). While an entry runs, another is refused with a
  // message (false).
  bool run(const QString& line);
  // Runs one entry and waits for it, serving the event loop; returns what it appended.
  QString submit(const QString& line);
  bool busy() const { return busy_; }
  // Stops the running entry at its next Lua instruction or training step.
  void interrupt();
  QPlainTextEdit* output() const { return output_; }
  ConsoleInput* input() const { return input_; }
  void appendOutput(const QString& text, const QColor& color = QColor());
  const QStringList& history() const { return history_; }

 Q_SIGNALS:
  // An entry ended (or waits for more lines); `shown` is what it appended.
  void entryFinished(const QString& shown);
  void busyChanged(bool busy);
  // mls.train started a run from the console: its live feed, for the Instruments tab.
  void liveRunStarted(std::shared_ptr<mls::Telemetry> telemetry);

 private:
  struct Outcome {
    lua::LuaHost::Status status;
    std::string out;
  };
  void finish(const Outcome& o, const QString& code);
  void setBusy(bool busy);
  // From the worker: a printed line, shown when the GUI thread gets to it.
  void post(const QString& text, const QColor& color);

  DocumentModel* model_;
  GuiThreadHistory bridge_;
  std::unique_ptr<lua::LuaHost> host_;
  QPlainTextEdit* output_;
  ConsoleInput* input_;
  QToolButton* stop_;
  QFutureWatcher<Outcome> watcher_;
  std::atomic<bool> cancel_{false};
  bool busy_ = false;
  QStringList history_;
  int history_pos_ = 0;
  QString pending_;  // an incomplete entry waiting for more lines
  QString shown_;    // what the running entry appended so far
  friend int console_print(struct lua_State*);
};

}  // namespace mls::editor
