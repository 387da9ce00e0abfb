// The inspector: the selected node's id, type, shapes and parameters, each parameter as an
// editor of its kind; with nothing selected, the project's training settings. Every change
// is an edit command on the model (so it can be undone); a refused value shows the reason.
#pragma once

#include <QLabel>
#include <QWidget>
#include <nlohmann/json.hpp>
#include <string>

#include "editor/document_model.h"

class QFormLayout;

namespace mls::editor {

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
  void buildNode(const nodes::NodeDoc& n);
  void buildProject();

  DocumentModel* model_;
  std::string node_id_;
  nlohmann::json shown_;  // what the form was built from, to rebuild only when it changed
  QLabel* title_;
  QLabel* info_;
  QWidget* form_host_ = nullptr;
  QFormLayout* form_ = nullptr;
};

}  // namespace mls::editor
