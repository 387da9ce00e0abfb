#include "editor/console_dock.h"

#include <QKeyEvent>
#include <QTextBlock>
#include <QVBoxLayout>
#include <lua.hpp>

#include "engine/cpu/cpu_backend.h"
#include "scripting/runtime.h"

namespace mls::editor {

void ConsoleInput::keyPressEvent(QKeyEvent* e) {
  if (e->key() == Qt::Key_Up) return Q_EMIT historyUp();
  if (e->key() == Qt::Key_Down) return Q_EMIT historyDown();
  if (e->key() == Qt::Key_Tab) return Q_EMIT complete();
  QLineEdit::keyPressEvent(e);
}

// print() in the console writes to its output, not to the terminal the editor started from.
int console_print(lua_State* L) {
  auto* self = static_cast<ConsoleWidget*>(lua_touserdata(L, lua_upvalueindex(1)));
  const int n = lua_gettop(L);
  QString line;
  for (int i = 1; i <= n; ++i) {
    size_t len = 0;
    const char* s = luaL_tolstring(L, i, &len);
    if (i > 1) line += '\t';
    line += QString::fromUtf8(s, static_cast<qsizetype>(len));
    lua_pop(L, 1);
  }
  self->captured_ += line + '\n';
  return 0;
}

ConsoleWidget::ConsoleWidget(DocumentModel* model, QWidget* parent)
    : QWidget(parent), model_(model), output_(new QPlainTextEdit), input_(new ConsoleInput) {
  // The console is the user's own: not sandboxed, as `mlstudio lua` without a file.
  host_ = std::make_unique<lua::LuaHost>(cpu::backend(), lua::ScriptOptions{});
  host_->runtime().project = model_;
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
  lay->addWidget(input_);
  appendOutput("Lua 5.4 with the mls module. mls.project.current() is the open project.", QColor(0x88, 0x88, 0x88));

  connect(input_, &QLineEdit::returnPressed, this, [this] {
    const QString line = input_->text();
    input_->clear();
    submit(line);
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
    const QString text = input_->text();
    int start = static_cast<int>(text.size());
    while (start > 0 && (text[start - 1].isLetterOrNumber() || text[start - 1] == '_' || text[start - 1] == '.' ||
                         text[start - 1] == ':'))
      --start;
    const auto options = host_->completions(text.mid(start).toStdString());
    if (options.size() == 1) {
      input_->setText(text.left(start) + QString::fromStdString(options[0]));
    } else if (options.size() > 1) {
      QStringList names;
      for (const auto& o : options) names << QString::fromStdString(o);
      appendOutput(names.join("  "), QColor(0x88, 0x88, 0x88));
    }
  });
}

ConsoleWidget::~ConsoleWidget() { host_->runtime().project = nullptr; }

void ConsoleWidget::appendOutput(const QString& text, const QColor& color) {
  QTextCharFormat fmt;
  if (color.isValid()) fmt.setForeground(color);
  QTextCursor c = output_->textCursor();
  c.movePosition(QTextCursor::End);
  if (!output_->document()->isEmpty()) c.insertBlock();
  c.insertText(text, fmt);
  output_->setTextCursor(c);
  output_->ensureCursorVisible();
}

QString ConsoleWidget::submit(const QString& line) {
  if (!line.trimmed().isEmpty() && pending_.isEmpty()) {
    history_ << line;
    history_pos_ = static_cast<int>(history_.size());
  }
  appendOutput((pending_.isEmpty() ? "> " : ">> ") + line, QColor(0x4e, 0xa0, 0xe6));
  const QString code = pending_.isEmpty() ? line : pending_ + "\n" + line;
  captured_.clear();
  host_->runtime().project_path = model_->path();
  std::string out;
  const auto status = host_->eval(code.toStdString(), &out);
  QString shown;
  if (!captured_.isEmpty()) {
    captured_.chop(1);
    appendOutput(captured_);
    shown += captured_;
  }
  if (status == lua::LuaHost::Status::Incomplete) {
    pending_ = code;
    input_->setPlaceholderText("... (the entry continues; an empty line ends a block)");
    return shown;
  }
  pending_.clear();
  input_->setPlaceholderText("Lua");
  if (!out.empty()) {
    const QString text = QString::fromStdString(out);
    appendOutput(text, status == lua::LuaHost::Status::Error ? QColor(0xd6, 0x3c, 0x3c) : QColor());
    shown += (shown.isEmpty() ? "" : "\n") + text;
  }
  return shown;
}

}  // namespace mls::editor
