// [SECTION] helpers
// [SECTION] construction
// [SECTION] running
// [SECTION] the file: save, reload, changes on disk, closing
#include "editor/script_editor.h"

#include <QAction>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMessageBox>
#include <QMetaObject>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTextBlock>
#include <QThread>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <lua.hpp>
#include <mutex>

#include "editor/console_dock.h"
#include "engine/core/atomic_file.h"
#include "engine/core/backend_registry.h"
#include "engine/core/check.h"
#include "scripting/pretty.h"
#include "scripting/runtime.h"

namespace mls::editor {

// [SECTION] helpers

namespace {

const QColor kGrey(0x88, 0x88, 0x88);
const QColor kRed(0xd6, 0x3c, 0x3c);
constexpr uint64_t kMaxScriptBytes = uint64_t{16} << 20;
// Printed text waiting for the GUI thread beyond this is dropped (a print loop cannot
// fill the memory faster than the pane shows it).
constexpr qsizetype kMaxPendingChars = qsizetype{4} << 20;

QKeySequence run_key() {
  return QKeySequence(Qt::Key_F5);
}
QKeySequence stop_script_key() {
  return QKeySequence(Qt::SHIFT | Qt::Key_F5);
}

// What the file holds now: nullopt when it is missing; an error when it exists and cannot
// be read (a folder, a FIFO, too large, no permission).
Result<std::optional<QByteArray>> read_disk(const QString& path) {
  if (!QFileInfo::exists(path)) return std::optional<QByteArray>{};
  auto bytes = read_whole_file(path.toStdString(), kMaxScriptBytes);
  if (!bytes) return bytes.error();
  return std::optional<QByteArray>(
      QByteArray(reinterpret_cast<const char*>(bytes->data()), qsizetype(bytes->size())));
}

}  // namespace

// Printed text from the worker, handed to the GUI thread in batches: one queued call at a
// time however fast the script prints.
struct ScriptEditor::PrintQueue {
  std::mutex mu;
  QString text;
  bool posted = false;
  bool dropped = false;
};

// A line from the worker (print, mls.train's progress) for the output pane: queued, and
// shown when the GUI thread gets to it, in the order the lines came.
void ScriptEditor::post(const QString& line) {
  PrintQueue* queue = prints_.get();
  bool first = false;
  {
    std::lock_guard lock(queue->mu);
    if (queue->text.size() + line.size() > kMaxPendingChars) {
      queue->dropped = true;
    } else {
      if (!queue->text.isEmpty()) queue->text += '\n';
      queue->text += line;
    }
    first = !queue->posted;
    queue->posted = true;
  }
  if (!first) return;
  QMetaObject::invokeMethod(
      this,
      [this, queue] {
        QString text;
        bool dropped = false;
        {
          std::lock_guard lock(queue->mu);
          text.swap(queue->text);
          dropped = queue->dropped;
          queue->dropped = false;
          queue->posted = false;
        }
        if (!text.isEmpty()) appendOutput(text);
        if (dropped) appendOutput("[output dropped: the script printed faster than shown]", kGrey);
      },
      Qt::QueuedConnection);
}

// print() in a script writes to the tab's output pane.
int script_print(lua_State* L) {
  auto* self = static_cast<ScriptEditor*>(lua_touserdata(L, lua_upvalueindex(1)));
  const int n = lua_gettop(L);
  QString line;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) line += '\t';
    line += QString::fromStdString(lua::print_text(L, i));  // tables as trees (pretty.h)
  }
  self->post(line);
  return 0;
}

// [SECTION] construction

Result<std::unique_ptr<ScriptEditor>> ScriptEditor::open(const QString& path,
                                                         ScriptEditorOptions options,
                                                         QWidget* parent) {
  const QString abs = QFileInfo(path).absoluteFilePath();
  auto bytes = read_disk(abs);
  if (!bytes) return make_error("cannot open " + abs.toStdString() + ": " + bytes.error().message);
  if (!*bytes) return make_error("cannot open " + abs.toStdString() + ": file not found");
  return std::unique_ptr<ScriptEditor>(new ScriptEditor(abs, **bytes, std::move(options), parent));
}

ScriptEditor::ScriptEditor(const QString& path, const QByteArray& text, ScriptEditorOptions options,
                           QWidget* parent)
    : QWidget(parent),
      path_(path),
      options_(std::move(options)),
      known_(text),
      edit_(new CodeEdit),
      output_(new QPlainTextEdit),
      prints_(std::make_unique<PrintQueue>()),
      toolbar_(new QToolBar),
      bar_(new QFrame),
      bar_text_(new QLabel),
      reload_(new QPushButton("Reload")),
      keep_(new QPushButton("Keep mine")) {
  setObjectName("script." + fileName());
  if (options_.model) bridge_ = std::make_unique<GuiThreadHistory>(options_.model);

  edit_->setObjectName("script.code");
  edit_->setFitToLines(false);  // the tab's height, scrolling itself
  edit_->setPlainText(QString::fromUtf8(text));
  edit_->document()->setModified(false);
  // Completion of mls names from an interpreter that never runs anything: the sandboxed
  // defaults are enough to list the module.
  edit_->completions = [this, host = std::shared_ptr<lua::LuaHost>()](
                           const std::string& prefix) mutable -> std::vector<std::string> {
    if (!host) {
      Backend* b = backend_registry().host();
      if (!b) return {};
      host = std::make_shared<lua::LuaHost>(
          *b, lua::ScriptOptions{.sandbox = true, .root = sandboxRoot().toStdString()});
    }
    return host->completions(prefix);
  };
  connect(edit_->document(), &QTextDocument::modificationChanged, this,
          &ScriptEditor::modifiedChanged);

  output_->setObjectName("script.output");
  output_->setReadOnly(true);
  output_->setMaximumBlockCount(20000);
  QFont mono("monospace");
  mono.setStyleHint(QFont::Monospace);
  output_->setFont(mono);
  output_->setPlaceholderText("F5 runs the script; what it prints appears here.");

  toolbar_->setObjectName("script.toolbar");
  toolbar_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  run_act_ = toolbar_->addAction("Run", this, [this] { (void)run(); });
  run_act_->setObjectName("script.run");
  run_act_->setToolTip("Run the script as it is in the editor, saved or not (" +
                       run_key().toString(QKeySequence::NativeText) + ")");
  stop_act_ = toolbar_->addAction("Stop", this, &ScriptEditor::stop);
  stop_act_->setObjectName("script.stop");
  stop_act_->setToolTip("Stop the running script at its next instruction (" +
                        stop_script_key().toString(QKeySequence::NativeText) + ")");
  stop_act_->setEnabled(false);
  save_act_ = toolbar_->addAction("Save", this, [this] { (void)save(); });
  save_act_->setObjectName("script.save");
  save_act_->setToolTip("Save " + fileName() + " (" +
                        QKeySequence(QKeySequence::Save).toString(QKeySequence::NativeText) + ")");
  toolbar_->addSeparator();
  trust_act_ = toolbar_->addAction("Trust this script");
  trust_act_->setObjectName("script.trust");
  trust_act_->setCheckable(true);
  trust_act_->setToolTip(
      "Run this file with your own rights: files anywhere, os.execute and io.popen, C modules, "
      "no memory limit. Off (the default), it runs in the sandbox: it reads and writes files "
      "only under its folder (the project's, when it is in the project). Only for scripts "
      "you wrote or have read. Kept for this file until mlstudio closes; dropped when the file "
      "is reloaded after another program changed it.");
  auto* where = new QLabel;
  where->setObjectName("script.where");
  where->setStyleSheet("color: grey; padding-left: 8px;");
  toolbar_->addWidget(where);
  auto show_where = [this, where] {
    where->setText(trusted() ? "trusted: runs with your rights"
                             : "sandboxed: files under " + sandboxRoot());
  };
  connect(trust_act_, &QAction::toggled, this, show_where);
  show_where();

  bar_->setObjectName("script.diskbar");
  bar_->setStyleSheet("#script\\.diskbar { background: #fff4c8; }");
  bar_text_->setStyleSheet("color: #3a3000;");  // dark on the bar's yellow in either theme
  auto* bar_lay = new QHBoxLayout(bar_);
  bar_lay->setContentsMargins(8, 3, 8, 3);
  bar_text_->setObjectName("script.diskbar.text");
  bar_text_->setWordWrap(true);
  reload_->setObjectName("script.reload");
  keep_->setObjectName("script.keep");
  bar_lay->addWidget(bar_text_, 1);
  bar_lay->addWidget(reload_);
  bar_lay->addWidget(keep_);
  bar_->hide();
  connect(reload_, &QPushButton::clicked, this, [this] { (void)reload(); });
  connect(keep_, &QPushButton::clicked, this, &ScriptEditor::keepMine);

  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(edit_);
  split->addWidget(output_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  split->setSizes({600, 180});
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(0);
  lay->addWidget(toolbar_);
  lay->addWidget(bar_);
  lay->addWidget(split, 1);

  // F5, Shift+F5 and Ctrl+S belong to the tab while it has the focus (the window's F5
  // trains, its Ctrl+S saves the project): taken before the window's shortcuts see them.
  for (QWidget* w : std::initializer_list<QWidget*>{edit_, output_, reload_, keep_})
    w->installEventFilter(this);

  connect(&run_watcher_, &QFutureWatcher<Outcome>::finished, this,
          [this] { finish(run_watcher_.result()); });

  // The folder too: a file deleted and written again (as some editors save) is seen when
  // it comes back.
  watcher_.addPath(QFileInfo(path_).absolutePath());
  watch();
  // A burst of changes (a program writing in pieces, a database journal beside the file)
  // is looked at once, when it has settled.
  disk_timer_.setSingleShot(true);
  disk_timer_.setInterval(100);
  connect(&disk_timer_, &QTimer::timeout, this, &ScriptEditor::checkDisk);
  auto changed = [this] {
    watch();  // a rename over the file or its deletion ended the old watch
    disk_timer_.start();
  };
  connect(&watcher_, &QFileSystemWatcher::fileChanged, this, changed);
  connect(&watcher_, &QFileSystemWatcher::directoryChanged, this, changed);
}

ScriptEditor::~ScriptEditor() {
  // Stop a running script; its calls into the document fail from now on, and the ones in
  // flight are served here, so the worker can end while this thread waits for it.
  cancel_.store(true);
  if (bridge_) bridge_->close();
  while (run_watcher_.isRunning()) {
    if (bridge_) bridge_->drain();
    QThread::msleep(2);
  }
  run_watcher_.waitForFinished();
}

QString ScriptEditor::fileName() const {
  return QFileInfo(path_).fileName();
}

bool ScriptEditor::isModified() const {
  return edit_->document()->isModified();
}

bool ScriptEditor::trusted() const {
  return trust_act_->isChecked();
}

QString ScriptEditor::sandboxRoot() const {
  const QString own = QFileInfo(path_).absolutePath();
  if (!options_.model || options_.model->path().empty()) return own;
  const QString project = QFileInfo(QString::fromStdString(options_.model->path())).absolutePath();
  const QString rel = QDir(project).relativeFilePath(path_);
  return rel.startsWith("../") || QDir::isAbsolutePath(rel) ? own : project;
}

void ScriptEditor::say(const QString& text, bool error) {
  message_ = text;
  Q_EMIT message(text, error);
}

void ScriptEditor::appendOutput(const QString& text, const QColor& color) {
  append_output(output_, text, color);
}

bool ScriptEditor::eventFilter(QObject* o, QEvent* e) {
  if (e->type() != QEvent::ShortcutOverride && e->type() != QEvent::KeyPress)
    return QWidget::eventFilter(o, e);
  const QKeySequence key(static_cast<QKeyEvent*>(e)->keyCombination());
  std::function<void()> act;
  if (key == run_key())
    act = [this] { (void)run(); };
  else if (key == stop_script_key())
    act = [this] { stop(); };
  else if (key == QKeySequence(QKeySequence::Save))
    act = [this] { (void)save(); };
  if (!act) return QWidget::eventFilter(o, e);
  e->accept();  // an accepted override: the key comes as a key press, not a shortcut
  if (e->type() == QEvent::KeyPress) act();
  return true;
}

// [SECTION] running

void ScriptEditor::setRunning(bool running) {
  running_ = running;
  run_act_->setEnabled(!running);
  stop_act_->setEnabled(running);
}

bool ScriptEditor::run() {
  if (running_) {
    say(fileName() + " is still running (Stop or " +
            stop_script_key().toString(QKeySequence::NativeText) + " interrupts it)",
        true);
    return false;
  }
  Backend* backend = backend_registry().host();
  MLS_CHECK(backend != nullptr, "running a Lua file needs the CPU backend registered");
  lua::ScriptOptions options;
  options.sandbox = !trusted();
  options.root = sandboxRoot().toStdString();
  options.db_path = options_.db_path;
  host_ = std::make_unique<lua::LuaHost>(*backend, options);
  lua::Runtime& rt = host_->runtime();
  // A run that mls.train starts records the script's file and its hash: only when that is
  // what runs (no unsaved edits), else it is recorded as the console's are.
  if (!isModified()) rt.script_path = path_.toStdString();
  if (bridge_) {
    rt.project = bridge_.get();
    rt.project_path = options_.model->path();
  }
  // mls.train's lines go to the pane; its live feed to the Instruments tab.
  rt.report = [this](const std::string& line) { post(QString::fromStdString(line)); };
  rt.new_telemetry = [this] {
    auto tm = std::make_shared<Telemetry>();
    QMetaObject::invokeMethod(
        this, [this, tm] { Q_EMIT liveRunStarted(tm); }, Qt::QueuedConnection);
    return tm;
  };
  cancel_.store(false);
  host_->set_interrupt(&cancel_);
  lua_State* L = host_->state();
  lua_pushlightuserdata(L, this);
  lua_pushcclosure(L, script_print, 1);
  lua_setglobal(L, "print");
  // arg[0]: the script's own path, as `mlstudio lua FILE` sets it.
  lua_createtable(L, 0, 1);
  lua_pushstring(L, path_.toUtf8().constData());
  lua_seti(L, -2, 0);
  lua_setglobal(L, "arg");

  output_->clear();
  edit_->markErrorLine(0);
  appendOutput(QString("running %1 (%2)")
                   .arg(fileName(),
                        trusted() ? QString("trusted") : "sandboxed: files under " + sandboxRoot()),
               kGrey);
  if (isModified())
    appendOutput(
        "(with unsaved edits: the runs it records do not name the file; save to "
        "record them with it)",
        kGrey);
  setRunning(true);
  lua::LuaHost* host = host_.get();
  const std::string code = edit_->toPlainText().toStdString();
  const std::string chunk = "=" + fileName().toStdString();
  clock_.start();
  run_watcher_.setFuture(QtConcurrent::run([host, code, chunk] {
    Outcome o;
    if (auto r = host->run_string(code, chunk); !r) {
      o.ok = false;
      o.error = r.error().message;  // the run a failing script started is ended as failed
    } else {
      host->runtime().end_run("finished");  // as run_file does
    }
    return o;
  }));
  return true;
}

void ScriptEditor::finish(const Outcome& o) {
  // The last printed lines were posted before the run ended: show them first.
  QCoreApplication::sendPostedEvents(this, QEvent::MetaCall);
  host_.reset();
  const double s = double(clock_.elapsed()) / 1e3;
  if (o.ok) {
    appendOutput(QString("finished in %1 s").arg(s, 0, 'f', 2), kGrey);
  } else {
    const int line = lua::error_line(o.error, fileName().toStdString());
    edit_->markErrorLine(line);
    appendOutput(QString::fromStdString(o.error), kRed);
    if (line > 0) {
      // The error's line in view.
      QTextCursor c(edit_->document()->findBlockByNumber(line - 1));
      edit_->setTextCursor(c);
      edit_->ensureCursorVisible();
    }
  }
  setRunning(false);
  // The error's first line names the file and line already ("explore.lua:9: ...").
  say(o.ok ? fileName() + " finished" : QString::fromStdString(o.error).section('\n', 0, 0), !o.ok);
  Q_EMIT runFinished(o.ok);
}

void ScriptEditor::stop() {
  if (!running_) return;
  cancel_.store(true);
  appendOutput("stopping…", kGrey);
}

// [SECTION] the file: save, reload, changes on disk, closing

void ScriptEditor::watch() {
  if (QFileInfo::exists(path_) && !watcher_.files().contains(path_)) watcher_.addPath(path_);
}

void ScriptEditor::showBar(const QString& text, bool offer_reload) {
  bar_text_->setText(text);
  reload_->setVisible(offer_reload);
  const bool was = bar_->isVisible();
  bar_->show();
  if (!was || bar_->property("text").toString() != text) Q_EMIT diskChangeShown();
  bar_->setProperty("text", text);
}

void ScriptEditor::hideBar() {
  bar_->hide();
  bar_->setProperty("text", QString());
}

void ScriptEditor::checkDisk() {
  watch();  // a rename over the file or its deletion ended the old watch
  auto now = read_disk(path_);
  if (!now) {
    showBar(fileName() + " cannot be read any more: " + QString::fromStdString(now.error().message),
            false);
    return;
  }
  if (*now == known_) {
    // Our own save, a touch, or the other program put back what we have.
    hideBar();
    return;
  }
  if (!*now) {
    // The editor's text is now the only copy: closing the tab asks.
    edit_->document()->setModified(true);
    showBar(fileName() + " was deleted on disk. Save writes it again from the editor.", false);
    return;
  }
  showBar(fileName() + " changed on disk" +
              (isModified() ? ", and you have unsaved edits here. Reload drops them (Undo "
                              "brings them back); Save asks before overwriting."
                            : "."),
          true);
}

bool ScriptEditor::reload() {
  auto now = read_disk(path_);
  if (!now || !*now) {
    say("cannot reload " + path_ + ": " +
            (now ? QString("it was deleted") : QString::fromStdString(now.error().message)),
        true);
    return false;
  }
  // One undoable edit: Undo gives the editor's text back.
  QTextCursor c(edit_->document());
  c.beginEditBlock();
  c.select(QTextCursor::Document);
  c.insertText(QString::fromUtf8(**now));
  c.endEditBlock();
  known_ = *now;
  edit_->document()->setModified(false);
  edit_->markErrorLine(0);
  hideBar();
  watch();
  // Trust was given to the text the user had; another program's is a stranger's.
  const bool was_trusted = trusted();
  trust_act_->setChecked(false);
  say("reloaded " + path_ + (was_trusted ? " (no longer trusted: it runs in the sandbox)" : ""),
      false);
  return true;
}

void ScriptEditor::keepMine() {
  hideBar();
  // The editor's text differs from the file's now: unsaved, and Save will ask.
  auto now = read_disk(path_);
  if (!now || *now != known_) edit_->document()->setModified(true);
}

bool ScriptEditor::save() {
  const QByteArray text = edit_->toPlainText().toUtf8();
  // Asked of the disk now, not of the watcher: its news may not have arrived yet.
  auto now = read_disk(path_);
  if (now && *now && *now != known_) {
    QMessageBox box(QMessageBox::Warning, "Overwrite " + fileName() + "?",
                    fileName() +
                        " was changed on disk by another program since it was read here. "
                        "Overwrite it with the editor's text? Its other version is then lost.",
                    QMessageBox::NoButton, this);
    box.setObjectName("script.overwrite");
    QPushButton* yes = box.addButton("Overwrite", QMessageBox::DestructiveRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(QMessageBox::Cancel);
    box.exec();
    if (box.clickedButton() != yes) {
      say(fileName() + " not saved: it changed on disk (Reload, or Save again to overwrite)",
          false);
      return false;
    }
  }
  if (auto r = write_text_atomically(path_.toStdString(),
                                     std::string_view(text.data(), size_t(text.size())));
      !r) {
    say("cannot save " + path_ + ": " + QString::fromStdString(r.error().message), true);
    return false;
  }
  known_ = text;
  edit_->document()->setModified(false);
  hideBar();
  watch();
  say("saved " + path_, false);
  return true;
}

bool ScriptEditor::maybeClose() {
  if (isModified()) {
    QMessageBox box(QMessageBox::Question, "Unsaved changes",
                    "Save the changes to " + fileName() + "?",
                    QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, this);
    box.setObjectName("script.close");
    box.setDefaultButton(QMessageBox::Save);
    const int answer = box.exec();
    if (answer == QMessageBox::Cancel) return false;
    if (answer == QMessageBox::Save && !save()) return false;
  }
  stop();
  return true;
}

}  // namespace mls::editor
