// The open project as the editor holds it: the document, its QUndoStack and the analysis
// the canvas draws (shapes, parameter counts, errors). The single source of truth: the
// scene, the inspector and the Lua console only read it and push edit commands, and every
// change raises changed().
//
//   DocumentModel model;
//   model.load("resources/examples/fashion-mnist-mlp.mls");
//   auto r = model.push(nodes::make_connect(model.doc(), "fc1:out", "relu1:in"));
//   if (!r) statusBar()->showMessage(QString::fromStdString(r.error().message));
//   model.undoStack()->undo();      // and redo(); the document is restored exactly
#pragma once

#include <QObject>
#include <QString>
#include <QUndoStack>
#include <chrono>
#include <optional>
#include <string>

#include "nodes/analysis.h"
#include "nodes/edit.h"

namespace mls::editor {

class DocumentModel : public QObject, public nodes::DocumentHistory {
  Q_OBJECT
 public:
  explicit DocumentModel(QObject* parent = nullptr);

  // [DocumentHistory] (what mls.project.current() edits through)
  const nodes::Document& doc() const override { return doc_; }
  Result<void> push(nodes::EditResult command) override;
  bool undo() override;
  bool redo() override;
  std::vector<std::string> history() const override;
  size_t history_index() const override;
  void mark_saved() override;
  // The next push starts its own undo step (nodes::kMergeIdle). Called whenever the keyboard
  // focus moves in the application: typing into a cell is one step until the person leaves it.
  void end_merge() override { merge_open_ = false; }

  // Several edits as one undo step ("Paste 3 nodes", "Auto-layout").
  void beginMacro(const QString& text) { stack_.beginMacro(text); }
  void endMacro() { stack_.endMacro(); }

  QUndoStack* undoStack() { return &stack_; }
  // "" for a project never saved.
  const std::string& path() const { return path_; }
  bool isModified() const { return !stack_.isClean(); }

  // Replaces the document (history cleared, state clean). A file that does not parse is not
  // opened; a draft (unlinked inputs, no loss yet) opens with its problems in warnings().
  // A file that parses as JSON but is broken or from a newer mlstudio opens partly: what
  // could not be read is left out and listed in salvaged(), and the document comes up
  // untitled and modified (Save asks for a name; the original stays as it was).
  Result<void> load(const std::string& path);
  const std::vector<std::string>& salvaged() const { return salvaged_; }
  const std::string& salvagedFrom() const { return salvaged_from_; }
  // `saved` false: the document differs from the file at `path` (recovered work), so it
  // counts as modified until saved.
  void reset(nodes::Document doc, const std::string& path = "", bool saved = true);
  Result<void> saveAs(const std::string& path);
  // The document as it would be saved (byte for byte what saveAs writes).
  std::string text() const;

  // Shapes, parameter counts and errors for the current document and data description.
  const nodes::DocumentAnalysis& analysis() const { return analysis_; }
  // What the dataset delivers (sample shape, classes); unset while it is being read or
  // when it cannot be read (datasetError() says why).
  void setDataContext(std::optional<nodes::InferContext> ctx, const QString& error = {});
  const std::optional<nodes::InferContext>& dataContext() const { return data_; }
  const QString& datasetError() const { return data_error_; }

  // The command applied by push() is recorded without being applied twice.
  void notifyChanged();

 Q_SIGNALS:
  // After every change of the document (edit, undo, redo, load) or of its analysis.
  void changed();
  // The document was replaced (load, reset); selection and views start over.
  void reloaded();
  // The dataset section changed: the data description must be read again.
  void datasetChanged();

 private:
  void reanalyze();

  nodes::Document doc_;
  std::string path_;
  std::vector<std::string> salvaged_;
  std::string salvaged_from_;
  QUndoStack stack_;
  nodes::DocumentAnalysis analysis_;
  std::optional<nodes::InferContext> data_;
  QString data_error_;
  nlohmann::json last_dataset_;
  // nodes::kMergeIdle: whether the command being pushed may join the step before it.
  bool merge_open_ = false;
  bool merging_ = false;
  std::chrono::steady_clock::time_point last_push_{};
  friend class EditUndoCommand;
};

}  // namespace mls::editor
