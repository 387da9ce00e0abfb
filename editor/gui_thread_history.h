// The open project, for a Lua entry that runs on the console's worker thread: every call
// runs on the GUI thread (where the DocumentModel lives) and the worker waits for it, so
// a script's edits go through the editor's undo stack while the window stays responsive.
//
//   GuiThreadHistory bridge(&model);          // made on the GUI thread
//   runtime.project = &bridge;                // the worker's mls.project.current() edits
//   ...                                       // through it
//   bridge.close();                           // before waiting for the worker to end
//   bridge.drain();                           // (on the GUI thread) serves calls in flight
#pragma once

#include <QObject>
#include <array>
#include <atomic>
#include <memory>

#include "editor/document_model.h"

namespace mls::editor {

class GuiThreadHistory final : public nodes::DocumentHistory {
 public:
  explicit GuiThreadHistory(DocumentModel* model);
  ~GuiThreadHistory() override;

  // A copy of the document as it is now. The reference stays valid across the next few
  // calls (a binding reads the document, builds a command and pushes it), not forever.
  const nodes::Document& doc() const override;
  Result<void> push(nodes::EditResult command) override;
  bool undo() override;
  bool redo() override;
  std::vector<std::string> history() const override;
  size_t history_index() const override;
  void mark_saved() override;

  // From now on calls from the worker fail ("the editor is closing") instead of waiting for
  // a GUI thread that is itself waiting for the worker.
  void close() { closed_.store(true); }
  // Runs the calls the worker has queued (the GUI thread, while it waits for the worker).
  void drain();

 private:
  // Runs `f` on the GUI thread and waits; false when closed.
  template <class F>
  bool on_gui(F&& f) const;

  DocumentModel* model_;
  std::unique_ptr<QObject> context_;  // lives on the GUI thread: the calls' receiver
  std::atomic<bool> closed_{false};
  // The last copies doc() handed out (a ring: references stay valid for a while).
  mutable std::array<nodes::Document, 8> copies_;
  mutable size_t next_copy_ = 0;
};

}  // namespace mls::editor
