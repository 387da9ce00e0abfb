// One of the project's Lua files in an editor tab: the code (CodeEdit: Lua highlighting,
// bracket matching, completion of mls names, the error's line marked), Save (Ctrl+S), Run
// (F5) and Stop (Shift+F5) while the tab has the focus, and under the code what the run
// printed and its error.
//
//   auto ed = ScriptEditor::open("lab1/explore.lua", {.db_path = "runs.db", .model = &model});
//   if (!ed) return showStatus(ed.error().message);
//   tabs->addTab(ed->release(), "explore.lua");
//
// A run happens on a worker thread in a fresh LuaHost (Stop interrupts it at its next
// instruction), sandboxed: files only under the script's folder, or under the project's
// folder when the script is inside it, no os.execute, a memory limit. "Trust this script"
// lifts the sandbox for this file (the main window remembers it for the session, not on
// disk); a Reload of another program's change drops it. The run is of the editor's text,
// saved or not.
//
// The file on disk is watched. Another program's change is offered in a bar over the code
// ("Reload" / "Keep mine"); with unsaved edits too, and then Save asks before overwriting
// it. A deleted file is said to be deleted, and Save writes it again. Saving replaces the
// file atomically and is not mistaken for another program's change (what is on disk is
// compared with what was last read or written, not its time stamp).
#pragma once

#include <QElapsedTimer>
#include <QFileSystemWatcher>
#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "editor/cell_widget.h"
#include "editor/document_model.h"
#include "editor/gui_thread_history.h"
#include "engine/core/result.h"
#include "engine/train/telemetry.h"
#include "scripting/lua_host.h"

class QAction;
class QFrame;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QToolBar;

namespace mls::editor {

struct ScriptEditorOptions {
  std::string db_path = "mlstudio-runs.db";  // where the script's mls.train runs are recorded
  DocumentModel* model = nullptr;            // the open project (mls.project.current()); null: none
};

class ScriptEditor : public QWidget {
  Q_OBJECT
 public:
  // Reads `path` (a regular file of at most 16 MiB) into a new editor; the error names the
  // file and why it cannot be read.
  static Result<std::unique_ptr<ScriptEditor>> open(const QString& path,
                                                    ScriptEditorOptions options = {},
                                                    QWidget* parent = nullptr);
  ~ScriptEditor() override;

  QString path() const { return path_; }
  QString fileName() const;
  bool isModified() const;
  // Writes the editor's text. When another program changed the file since it was read (or
  // last saved here), a question asks before overwriting it; false when not written (the
  // answer was no, or the write failed: message() says why).
  bool save();
  // Runs the editor's text on the worker thread; false when a run is under way.
  bool run();
  void stop();  // the running script stops at its next instruction ("interrupted")
  bool running() const { return running_; }
  // Trusted: the next run has the user's own rights (no sandbox).
  bool trusted() const;
  // The folder a sandboxed run may read and write: the project's when the file is inside
  // it, else the file's own.
  QString sandboxRoot() const;
  // Closing the tab: with unsaved edits a question offers Save, Discard or Cancel; false:
  // keep the tab. A running script is stopped.
  bool maybeClose();
  // Reloads the file from disk (the bar's "Reload"); the editor's text before it can be
  // restored with Undo. Trust is dropped: the text is another program's.
  bool reload();
  // The bar's "Keep mine": the bar goes, the editor keeps its text (Save will still ask).
  void keepMine();

  CodeEdit* editor() const { return edit_; }
  QPlainTextEdit* output() const { return output_; }
  QFrame* diskBar() const { return bar_; }
  QLabel* diskMessage() const { return bar_text_; }
  QPushButton* reloadButton() const { return reload_; }
  QPushButton* keepButton() const { return keep_; }
  QAction* runAction() const { return run_act_; }
  QAction* stopAction() const { return stop_act_; }
  QAction* saveAction() const { return save_act_; }
  QAction* trustAction() const { return trust_act_; }
  QString lastMessage() const { return message_; }

 Q_SIGNALS:
  void modifiedChanged(bool modified);  // the tab's title shows it
  void runFinished(bool ok);
  // The file changed on disk (or went away) and the bar offers what to do.
  void diskChangeShown();
  // The script started an mls.train: its live feed, for the Instruments tab.
  void liveRunStarted(std::shared_ptr<mls::Telemetry> telemetry);
  void message(const QString& text, bool error);

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  ScriptEditor(const QString& path, const QByteArray& text, ScriptEditorOptions options,
               QWidget* parent);
  struct Outcome {
    bool ok = true;
    std::string error;
  };
  struct PrintQueue;
  void finish(const Outcome& o);
  void appendOutput(const QString& text, const QColor& color = QColor());
  void post(const QString& line);  // from the worker
  void setRunning(bool running);
  void say(const QString& text, bool error);
  // From the watcher: what is on disk now, against what was last read or written here.
  void checkDisk();
  void watch();
  void showBar(const QString& text, bool offer_reload);
  void hideBar();

  QString path_;
  ScriptEditorOptions options_;
  // What the file held when last read or written here; nullopt: it was missing.
  std::optional<QByteArray> known_;
  CodeEdit* edit_;
  QPlainTextEdit* output_;
  std::unique_ptr<PrintQueue> prints_;  // print() from the worker, on its way to output_
  QToolBar* toolbar_;
  QFrame* bar_;
  QLabel* bar_text_;
  QPushButton* reload_;
  QPushButton* keep_;
  QAction *run_act_, *stop_act_, *save_act_, *trust_act_;
  QFileSystemWatcher watcher_;
  QTimer disk_timer_;
  QString message_;

  std::unique_ptr<GuiThreadHistory> bridge_;  // mls.project.current() from the worker
  std::unique_ptr<lua::LuaHost> host_;        // the running script's; null between runs
  QFutureWatcher<Outcome> run_watcher_;
  QElapsedTimer clock_;
  std::atomic<bool> cancel_{false};
  bool running_ = false;
  friend int script_print(struct lua_State*);
};

}  // namespace mls::editor
