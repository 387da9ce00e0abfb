#include "editor/console_dock.h"

#include <QEventLoop>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QTextBlock>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <lua.hpp>

#include "engine/core/backend_registry.h"
#include "engine/core/check.h"
#include "scripting/pretty.h"
#include "scripting/runtime.h"

namespace mls::editor {

void ConsoleInput::keyPressEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Up) return Q_EMIT historyUp();
  if (e->key() == Qt::Key_Down) return Q_EMIT historyDown();
  if (e->key() == Qt::Key_Tab) return Q_EMIT complete();
  if (e->key() == Qt::Key_Escape) return Q_EMIT escape();
  QLineEdit::keyPressEvent(e);
}

namespace {
const QColor kGrey(0x88, 0x88, 0x88);
}  // namespace

// print() in the console writes to its output, not to the terminal the editor started from;
// it runs on the worker, so the line is posted to the GUI thread.
int console_print(lua_State* L) {
  auto* self = static_cast<ConsoleWidget*>(lua_touserdata(L, lua_upvalueindex(1)));
  const int n = lua_gettop(L);
  QString line;
  for (int i = 1; i <= n; ++i) {
    if (i > 1) line += '\t';
    line += QString::fromStdString(lua::print_text(L, i));  // tables as trees (pretty.h)
  }
  self->post(line, QColor());
  return 0;
}

ConsoleWidget::ConsoleWidget(DocumentModel* model, const std::string& db_path, QWidget* parent)
    : QWidget(parent),
      model_(model),
      bridge_(model),
      output_(new QPlainTextEdit),
      input_(new ConsoleInput),
      stop_(new QToolButton) {
  // The console is the user's own: not sandboxed, as `mlstudio lua` without a file.
  lua::ScriptOptions options;
  options.db_path = db_path;
  // On the host, as `mlstudio lua`: the registry's CPU backend (app/ registered it).
  Backend* host = backend_registry().host();
  MLS_CHECK(host != nullptr, "the Lua console needs the CPU backend registered");
  host_ = std::make_unique<lua::LuaHost>(*host, options);
  host_->runtime().project = &bridge_;
  host_->runtime().report = [this](const std::string& line) {
    post(QString::fromStdString(line), kGrey);
  };
  // mls.train from here feeds the Instruments tab as the Train button's runs do: the run
  // session fills the feed on the worker, the panel reads it on the GUI thread.
  host_->runtime().new_telemetry = [this] {
    auto tm = std::make_shared<Telemetry>();
    QMetaObject::invokeMethod(this, [this, tm] { Q_EMIT liveRunStarted(tm); }, Qt::QueuedConnection);
    return tm;
  };
  host_->set_interrupt(&cancel_);
  lua_pushlightuserdata(host_->state(), this);
  lua_pushcclosure(host_->state(), console_print, 1);
  lua_setglobal(host_->state(), "print");

  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(4, 4, 4, 4);
  lay->setSpacing(4);
  output_->setReadOnly(true);
  output_->setObjectName("console.output");
  input_->setObjectName("console.input");
  QFont mono("Monospace");
  mono.setStyleHint(QFont::TypeWriter);
  output_->setFont(mono);
  input_->setFont(mono);
  input_->setPlaceholderText("Lua: try  mls.project.current():nodes()  or  mls.randn{2,3}");
  lay->addWidget(output_, 1);
  auto* row = new QHBoxLayout;
  row->setSpacing(4);
  row->addWidget(input_, 1);
  stop_->setText("Stop");
  stop_->setObjectName("console.stop");
  stop_->setToolTip("Stop the running entry (Esc in the input)");
  stop_->setEnabled(false);
  row->addWidget(stop_);
  lay->addLayout(row);
  appendOutput(
      "Lua 5.4 with the mls module. mls.project.current() is the open project. A long "
      "entry runs in the background: Esc or Stop interrupts it.",
      kGrey);
  connect(stop_, &QToolButton::clicked, this, &ConsoleWidget::interrupt);
  connect(input_, &ConsoleInput::escape, this, [this] {
    if (busy_) interrupt();
  });
  connect(&watcher_, &QFutureWatcher<Outcome>::finished, this,
          [this] { finish(watcher_.result(), watcher_.property("code").toString()); });

  connect(input_, &QLineEdit::returnPressed, this, [this] {
    if (busy_) return;  // the text stays for when the running entry ends
    const QString line = input_->text();
    input_->clear();
    run(line);
  });
  connect(input_, &ConsoleInput::historyUp, this, [this] {
    if (history_.isEmpty()) return;
    history_pos_ = std::max(0, history_pos_ - 1);
    input_->setText(history_[history_pos_]);
  });
  connect(input_, &ConsoleInput::historyDown, this, [this] {
    history_pos_ = std::min<int>(static_cast<int>(history_.size()), history_pos_ + 1);
    input_->setText(history_pos_ < history_.size() ? history_[history_pos_] : QString());
  });
  connect(input_, &ConsoleInput::complete, this, [this] {
    if (busy_) return;  // the interpreter is the running entry's
    const QString text = input_->text();
    int start = static_cast<int>(text.size());
    while (start > 0 && (text[start - 1].isLetterOrNumber() || text[start - 1] == '_' ||
                         text[start - 1] == '.' || text[start - 1] == ':'))
      --start;
    const auto options = host_->completions(text.mid(start).toStdString());
    if (options.size() == 1) {
      input_->setText(text.left(start) + QString::fromStdString(options[0]));
    } else if (options.size() > 1) {
      QStringList names;
      for (const auto& o : options) names << QString::fromStdString(o);
      appendOutput(names.join("  "), kGrey);
    }
  });
}

ConsoleWidget::~ConsoleWidget() {
  // Stop a running entry; its calls into the document fail from now on, and the ones in
  // flight are served here, so the worker can end while this thread waits for it.
  cancel_.store(true);
  bridge_.close();
  while (watcher_.isRunning()) {
    bridge_.drain();
    QThread::msleep(2);
  }
  watcher_.waitForFinished();
  host_->runtime().project = nullptr;
}

void append_output(QPlainTextEdit* output, const QString& text, const QColor& color) {
  QTextCharFormat fmt;
  if (color.isValid()) fmt.setForeground(color);
  QTextCursor c = output->textCursor();
  c.movePosition(QTextCursor::End);
  if (!output->document()->isEmpty()) c.insertBlock();
  c.insertText(text, fmt);
  output->setTextCursor(c);
  output->ensureCursorVisible();
}

void ConsoleWidget::appendOutput(const QString& text, const QColor& color) {
  append_output(output_, text, color);
}

void ConsoleWidget::post(const QString& text, const QColor& color) {
  QMetaObject::invokeMethod(
      this,
      [this, text, color] {
        appendOutput(text, color);
        shown_ += (shown_.isEmpty() ? "" : "\n") + text;
      },
      Qt::QueuedConnection);
}

void ConsoleWidget::setBusy(bool busy) {
  busy_ = busy;
  stop_->setEnabled(busy);
  input_->setPlaceholderText(busy ? "running… (Esc or Stop interrupts it)"
                             : pending_.isEmpty()
                                 ? "Lua: try  mls.project.current():nodes()  or  mls.randn{2,3}"
                                 : "... (the entry continues; an empty line ends a block)");
  Q_EMIT busyChanged(busy);
}

bool ConsoleWidget::run(const QString& line) {
  if (busy_) {
    appendOutput("busy: the last entry is still running (Esc or Stop interrupts it)", kGrey);
    return false;
  }
  if (!line.trimmed().isEmpty() && pending_.isEmpty()) {
    history_ << line;
    history_pos_ = static_cast<int>(history_.size());
  }
  appendOutput((pending_.isEmpty() ? "> " : ">> ") + line, QColor(0x4e, 0xa0, 0xe6));
  const QString code = pending_.isEmpty() ? line : pending_ + "\n" + line;
  shown_.clear();
  cancel_.store(false);
  host_->runtime().project_path = model_->path();
  setBusy(true);
  watcher_.setProperty("code", code);
  lua::LuaHost* host = host_.get();
  watcher_.setFuture(QtConcurrent::run([host, c = code.toStdString()] {
    Outcome o;
    o.status = host->eval(c, &o.out);
    return o;
  }));
  return true;
}

void ConsoleWidget::finish(const Outcome& o, const QString& code) {
  if (o.status == lua::LuaHost::Status::Incomplete) {
    pending_ = code;
  } else {
    pending_.clear();
    if (!o.out.empty()) {
      const QString text = QString::fromStdString(o.out);
      appendOutput(text,
                   o.status == lua::LuaHost::Status::Error ? QColor(0xd6, 0x3c, 0x3c) : QColor());
      shown_ += (shown_.isEmpty() ? "" : "\n") + text;
    }
  }
  setBusy(false);
  Q_EMIT entryFinished(shown_);
}

void ConsoleWidget::interrupt() {
  if (!busy_) return;
  cancel_.store(true);
  appendOutput("stopping…", kGrey);
}

QString ConsoleWidget::submit(const QString& line) {
  if (!run(line)) return "busy";
  QEventLoop loop;
  QString shown;
  connect(this, &ConsoleWidget::entryFinished, &loop, [&](const QString& s) {
    shown = s;
    loop.quit();
  });
  loop.exec();
  return shown;
}

}  // namespace mls::editor
