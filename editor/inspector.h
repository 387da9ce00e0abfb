// The inspector: the selected node's id, type, shapes and parameters, each parameter as an
// editor of its kind; with nothing selected, the project's training settings. Every change
// is an edit command on the model (so it can be undone); a refused value shows the reason.
//
// A field's signal is still being delivered when its edit changes the document (Enter in a
// spin box, its arrows, a checkbox), so the form is never deleted there: while the same
// node (or the project) is shown with fields of the same kinds, refresh() writes the new
// values into the existing fields; only another form replaces it, and the old one goes with
// deleteLater(), once control is back in the event loop.
#pragma once

#include <QDoubleSpinBox>
#include <QLabel>
#include <QWidget>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "editor/document_model.h"

class QFormLayout;

namespace mls::editor {

// A spin box for a real number of any magnitude (a learning rate of 1e-7 or 50): it shows
// the shortest text that reads back as the value, instead of a fixed number of decimals, and
// takes what is typed up to its range (the document refuses what it does not allow, with a
// message) rather than capping it silently.
class RealSpinBox : public QDoubleSpinBox {
  Q_OBJECT
 public:
  explicit RealSpinBox(QWidget* parent = nullptr);
  QString textFromValue(double value) const override;
  double valueFromText(const QString& text) const override;
  QValidator::State validate(QString& text, int& pos) const override;
  void fixup(QString& text) const override;
};

class Inspector : public QWidget {
  Q_OBJECT
 public:
  explicit Inspector(DocumentModel* model, QWidget* parent = nullptr);
  void showNode(const std::string& id);  // "" : the project's settings
  const std::string& nodeId() const { return node_id_; }

 Q_SIGNALS:
  void message(const QString& text, bool error);

 private:
  void rebuild();
  void refresh();
  void pushParams(const nlohmann::json& patch);
  void pushTraining(const nlohmann::json& patch);
  const nodes::NodeDoc& node() const;  // the one shown (node_id_ names one)
  void buildNode(const nodes::NodeDoc& n);
  void buildProject();
  // The kinds of the fields a form for `shown` has: equal keys, the same form.
  nlohmann::json formKey(const nlohmann::json& shown) const;
  // Registers how `w` shows the current document's value (signals blocked meanwhile).
  void addSync(QWidget* w, std::function<void()> sync);

  DocumentModel* model_;
  std::string node_id_;
  nlohmann::json shown_;     // what the form shows, to update it only when it changed
  nlohmann::json form_key_;  // formKey() of the form built
  std::vector<std::function<void()>> syncs_;  // write the document's values into the fields
  QLabel* title_;
  QLabel* info_;
  QWidget* form_host_ = nullptr;
  QFormLayout* form_ = nullptr;
};

}  // namespace mls::editor
