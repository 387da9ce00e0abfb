#include "editor/gui_thread_history.h"

#include <QCoreApplication>
#include <QThread>

namespace mls::editor {

GuiThreadHistory::GuiThreadHistory(DocumentModel* model) : model_(model), context_(new QObject) {}

GuiThreadHistory::~GuiThreadHistory() = default;

template <class F>
bool GuiThreadHistory::on_gui(F&& f) const {
  if (QThread::currentThread() == context_->thread()) {
    f();
    return true;
  }
  if (closed_.load()) return false;
  return QMetaObject::invokeMethod(
      context_.get(),
      [this, &f] {
        if (!closed_.load()) f();
      },
      Qt::BlockingQueuedConnection);
}

void GuiThreadHistory::drain() {
  QCoreApplication::sendPostedEvents(context_.get(), QEvent::MetaCall);
}

const nodes::Document& GuiThreadHistory::doc() const {
  nodes::Document& slot = copies_[next_copy_++ % copies_.size()];
  if (!on_gui([&] { slot = model_->doc(); })) slot = nodes::Document{};
  return slot;
}

Result<void> GuiThreadHistory::push(nodes::EditResult command) {
  Result<void> r = make_error("the editor is closing: the edit was not made");
  on_gui([&] { r = model_->push(std::move(command)); });
  return r;
}

bool GuiThreadHistory::undo() {
  bool ok = false;
  on_gui([&] { ok = model_->undo(); });
  return ok;
}

bool GuiThreadHistory::redo() {
  bool ok = false;
  on_gui([&] { ok = model_->redo(); });
  return ok;
}

std::vector<std::string> GuiThreadHistory::history() const {
  std::vector<std::string> h;
  on_gui([&] { h = model_->history(); });
  return h;
}

size_t GuiThreadHistory::history_index() const {
  size_t i = 0;
  on_gui([&] { i = model_->history_index(); });
  return i;
}

void GuiThreadHistory::mark_saved() {
  on_gui([&] { model_->mark_saved(); });
}

}  // namespace mls::editor
