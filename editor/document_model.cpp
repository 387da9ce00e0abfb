#include "editor/document_model.h"

#include <QApplication>
#include <QWidget>

#include "datasets/dataset_spec.h"
#include "engine/core/check.h"

namespace mls::editor {

// A document edit on the QUndoStack. QUndoStack::push calls redo() at once; the command was
// already applied (push() must know whether it succeeds before it is recorded), so the
// first redo() does nothing. Commands with a merge key join the step before them through
// QUndoStack's own merging (id(), mergeWith()) under the rule of nodes::kMergeIdle.
class EditUndoCommand : public QUndoCommand {
 public:
  EditUndoCommand(DocumentModel* model, std::unique_ptr<nodes::EditCommand> command)
      : QUndoCommand(QString::fromStdString(command->text())),
        model_(model),
        command_(std::move(command)) {}

  void redo() override {
    if (applied_once_) {
      auto r = command_->apply(model_->doc_);
      // Every edit goes through this stack, so a redo finds the document as it left it.
      MLS_CHECK(r.ok(),
                "redo of a document edit failed: the document was changed outside the undo stack");
      model_->merge_open_ = false;
      model_->notifyChanged();
    }
    applied_once_ = true;
  }
  void undo() override {
    command_->revert(model_->doc_);
    model_->merge_open_ = false;
    model_->notifyChanged();
  }
  // QUndoStack merges only commands of one id; the keys are compared in mergeWith.
  int id() const override { return command_->merge_key().empty() ? -1 : 1; }
  bool mergeWith(const QUndoCommand* other) override {
    const auto* next = static_cast<const EditUndoCommand*>(other);
    if (!model_->merging_ || next->command_->merge_key() != command_->merge_key() ||
        !command_->merge_with(*next->command_))
      return false;
    // Typed and erased again: QUndoStack drops the step, and the next edit starts anew.
    setObsolete(command_->changes_nothing(model_->doc_));
    if (isObsolete()) model_->merge_open_ = false;
    return true;
  }

 private:
  DocumentModel* model_;
  std::unique_ptr<nodes::EditCommand> command_;
  bool applied_once_ = false;
};

DocumentModel::DocumentModel(QObject* parent) : QObject(parent) {
  stack_.setUndoLimit(0);
  // Focus moving anywhere (out of a cell, into the canvas, another window) ends an edit.
  if (auto* app = qobject_cast<QApplication*>(QCoreApplication::instance()))
    connect(app, &QApplication::focusChanged, this, [this] { end_merge(); });
  reanalyze();
}

Result<void> DocumentModel::push(nodes::EditResult command) {
  if (!command) return command.error();
  if (auto r = (*command)->apply(doc_); !r) return r.error();
  const auto now = std::chrono::steady_clock::now();
  // QUndoStack itself refuses to merge into the saved (clean) state.
  merging_ = merge_open_ && now - last_push_ < nodes::kMergeIdle;
  merge_open_ = true;
  last_push_ = now;
  stack_.push(new EditUndoCommand(this, std::move(*command)));
  merging_ = false;
  notifyChanged();
  return {};
}

bool DocumentModel::undo() {
  if (!stack_.canUndo()) return false;
  stack_.undo();
  return true;
}

bool DocumentModel::redo() {
  if (!stack_.canRedo()) return false;
  stack_.redo();
  return true;
}

std::vector<std::string> DocumentModel::history() const {
  std::vector<std::string> out;
  for (int i = 0; i < stack_.count(); ++i) out.push_back(stack_.text(i).toStdString());
  return out;
}

size_t DocumentModel::history_index() const {
  return static_cast<size_t>(stack_.index());
}

void DocumentModel::mark_saved() {
  stack_.setClean();
  merge_open_ = false;
}

Result<void> DocumentModel::load(const std::string& path) {
  salvaged_.clear();
  auto doc = nodes::load_document(path, nodes::GraphCheck::Draft);
  if (doc) {
    reset(std::move(*doc), path);
    return {};
  }
  // Broken or from a newer mlstudio: open what can be read, as an unsaved copy, so that
  // Save cannot overwrite the original with less than it holds.
  auto part = nodes::load_document(path, nodes::GraphCheck::Salvage);
  if (!part) return doc.error();
  std::vector<std::string> lost = part->warnings;
  reset(std::move(*part), "", false);
  salvaged_ = lost;
  salvaged_from_ = path;
  return {};
}

void DocumentModel::reset(nodes::Document doc, const std::string& path, bool saved) {
  doc_ = std::move(doc);
  path_ = path;
  stack_.clear();
  merge_open_ = false;
  if (saved)
    stack_.setClean();
  else
    stack_.resetClean();
  data_.reset();
  data_error_.clear();
  last_dataset_ = nlohmann::json(data::dataset_spec_to_json(doc_.dataset));
  Q_EMIT reloaded();
  Q_EMIT datasetChanged();
  notifyChanged();
}

Result<void> DocumentModel::saveAs(const std::string& path) {
  if (auto r = nodes::save_document(doc_, path); !r) return r;
  path_ = path;
  stack_.setClean();
  merge_open_ = false;
  return {};
}

std::string DocumentModel::text() const {
  return nodes::serialize_document(doc_);
}

void DocumentModel::setDataContext(std::optional<nodes::InferContext> ctx, const QString& error) {
  data_ = std::move(ctx);
  data_error_ = error;
  reanalyze();
  Q_EMIT changed();
}

void DocumentModel::notifyChanged() {
  nlohmann::json ds = nlohmann::json(data::dataset_spec_to_json(doc_.dataset));
  if (ds != last_dataset_) {
    last_dataset_ = ds;
    data_.reset();
    Q_EMIT datasetChanged();
  }
  reanalyze();
  Q_EMIT changed();
}

void DocumentModel::reanalyze() {
  // Without a data description the input node has no shape; everything after it waits.
  const nodes::InferContext ctx = data_.value_or(nodes::InferContext{});
  analysis_ = nodes::analyze_document(doc_, ctx, path_.empty() ? "untitled" : path_);
}

}  // namespace mls::editor
