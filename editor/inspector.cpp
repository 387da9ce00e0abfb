#include "editor/inspector.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>
#include <limits>

#include "nodes/catalogue.h"

namespace mls::editor {

using nlohmann::json;

Inspector::Inspector(DocumentModel* model, QWidget* parent)
    : QWidget(parent), model_(model), title_(new QLabel), info_(new QLabel) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(10, 8, 10, 8);
  lay->setSpacing(8);
  QFont f = title_->font();
  f.setBold(true);
  f.setPointSizeF(f.pointSizeF() * 1.15);
  title_->setFont(f);
  info_->setWordWrap(true);
  info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(title_);
  lay->addWidget(info_);
  form_host_ = new QWidget;
  lay->addWidget(form_host_);
  lay->addStretch(1);
  connect(model_, &DocumentModel::changed, this, &Inspector::refresh);
  connect(model_, &DocumentModel::reloaded, this, [this] { showNode(""); });
  showNode("");
}

void Inspector::showNode(const std::string& id) {
  node_id_ = id;
  shown_ = nullptr;
  refresh();
}

void Inspector::refresh() {
  const nodes::Document& doc = model_->doc();
  if (!node_id_.empty() && !nodes::find_node(doc, node_id_)) node_id_.clear();
  json now;
  if (!node_id_.empty()) {
    const auto& n = doc.nodes[*nodes::find_node(doc, node_id_)];
    now = {{"id", n.id}, {"type", n.type}, {"params", n.params}};
  } else {
    now = {{"training", nlohmann::json(nodes::training_json(doc.training))}, {"name", doc.name}};
  }
  // Shapes and errors change with other nodes; the form only when this node's data does.
  if (now != shown_) {
    shown_ = now;
    rebuild();
  }
  if (node_id_.empty()) {
    const auto& a = model_->analysis();
    QString text = QString("%1 nodes, %2 links, %3 parameters").arg(doc.nodes.size()).arg(doc.links.size()).arg(a.total_params);
    if (!model_->datasetError().isEmpty()) text += "<br><span style='color:#d63c3c'>dataset: " + model_->datasetError().toHtmlEscaped() + "</span>";
    for (const auto& p : a.problems) text += "<br><span style='color:#c98a1a'>" + QString::fromStdString(p).toHtmlEscaped() + "</span>";
    info_->setText(text);
    return;
  }
  const auto& a = model_->analysis().nodes;
  auto it = a.find(node_id_);
  QString text;
  if (it != a.end()) {
    const nodes::NodeAnalysis& na = it->second;
    if (na.inferred) {
      QStringList shapes;
      for (const auto& s : na.outputs) shapes << QString::fromStdString(nodes::format_shape(s));
      text = "output " + shapes.join(", ") + QString("<br>%1 parameters").arg(na.params);
    } else if (!na.error.empty()) {
      text = "<span style='color:#d63c3c'>" + QString::fromStdString(na.error).toHtmlEscaped() + "</span>";
    } else {
      text = QString::fromStdString(na.waiting).toHtmlEscaped();
    }
  }
  info_->setText(text);
}

void Inspector::pushParams(const json& patch) {
  auto r = model_->push(nodes::make_set_params(model_->doc(), node_id_, patch));
  if (!r) {
    Q_EMIT message(QString::fromStdString(r.error().message), true);
    shown_ = nullptr;  // put the old value back in the form
    refresh();
  }
}

void Inspector::pushTraining(const json& patch) {
  auto r = model_->push(nodes::make_set_training(model_->doc(), patch));
  if (!r) {
    Q_EMIT message(QString::fromStdString(r.error().message), true);
    shown_ = nullptr;
    refresh();
  }
}

void Inspector::rebuild() {
  delete form_host_;
  form_host_ = new QWidget;
  form_ = new QFormLayout(form_host_);
  form_->setContentsMargins(0, 0, 0, 0);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  static_cast<QVBoxLayout*>(layout())->insertWidget(2, form_host_);
  if (node_id_.empty()) buildProject();
  else buildNode(model_->doc().nodes[*nodes::find_node(model_->doc(), node_id_)]);
}

void Inspector::buildNode(const nodes::NodeDoc& n) {
  const nodes::NodeTypeDef* def = nodes::builtin_catalogue().find(n.type);
  title_->setText(QString::fromStdString(n.id));
  auto* id_edit = new QLineEdit(QString::fromStdString(n.id));
  id_edit->setObjectName("inspector.id");
  form_->addRow("Id", id_edit);
  connect(id_edit, &QLineEdit::editingFinished, this, [this, id_edit] {
    const std::string new_id = id_edit->text().toStdString();
    if (new_id == node_id_) return;
    auto r = model_->push(nodes::make_rename_node(model_->doc(), node_id_, new_id));
    if (!r) {
      Q_EMIT message(QString::fromStdString(r.error().message), true);
      id_edit->setText(QString::fromStdString(node_id_));
      return;
    }
    node_id_ = new_id;
    refresh();
  });
  form_->addRow("Type", new QLabel(QString::fromStdString(def ? def->display_name + "  (" + n.type + ")" : n.type)));
  // Where it runs when the project trains on a GPU: there, or on the CPU (with copies).
  auto* device = new QComboBox;
  device->setObjectName("inspector.device");
  device->addItem("project's device", QString());
  device->addItem("cpu", QString("cpu"));
  device->setCurrentIndex(n.device == "cpu" ? 1 : 0);
  device->setToolTip("Run this node on the project's device, or on the CPU while the rest trains on a GPU "
                     "(its operands are copied there and back each step)");
  connect(device, &QComboBox::currentIndexChanged, this, [this, device](int) {
    auto r = model_->push(nodes::make_set_node_device(model_->doc(), node_id_, device->currentData().toString().toStdString()));
    if (!r) {
      Q_EMIT message(QString::fromStdString(r.error().message), true);
      shown_ = nullptr;
      refresh();
    }
  });
  form_->addRow("Runs on", device);
  if (!def) return;
  for (const nodes::ParamDef& p : def->params) {
    const json value = n.params.contains(p.name) ? n.params[p.name] : p.default_value;
    QWidget* w = nullptr;
    const std::string name = p.name;
    if (p.kind == nodes::ParamKind::Bool && value.is_boolean()) {
      auto* c = new QCheckBox;
      c->setChecked(value.get<bool>());
      connect(c, &QCheckBox::toggled, this, [this, name](bool on) { pushParams({{name, on}}); });
      w = c;
    } else if (p.kind == nodes::ParamKind::Enum) {
      auto* c = new QComboBox;
      for (const auto& choice : p.choices) c->addItem(QString::fromStdString(choice));
      if (value.is_string()) c->setCurrentText(QString::fromStdString(value.get<std::string>()));
      connect(c, &QComboBox::currentTextChanged, this, [this, name](const QString& t) { pushParams({{name, t.toStdString()}}); });
      w = c;
    } else if (p.kind == nodes::ParamKind::Int && value.is_number_integer()) {
      auto* s = new QSpinBox;
      s->setRange(p.min ? static_cast<int>(*p.min) : -1000000000, p.max ? static_cast<int>(*p.max) : 1000000000);
      s->setValue(static_cast<int>(value.get<int64_t>()));
      s->setKeyboardTracking(false);
      connect(s, &QSpinBox::valueChanged, this, [this, name](int v) { pushParams({{name, v}}); });
      w = s;
    } else if (p.kind == nodes::ParamKind::Float && value.is_number()) {
      auto* s = new QDoubleSpinBox;
      s->setDecimals(6);
      s->setRange(p.min.value_or(-1e9), p.max.value_or(1e9));
      s->setSingleStep(0.01);
      s->setValue(value.get<double>());
      s->setKeyboardTracking(false);
      connect(s, &QDoubleSpinBox::valueChanged, this, [this, name](double v) { pushParams({{name, v}}); });
      w = s;
    } else {
      // Strings, and values that are not one scalar (a kernel size [3, 3]): edited as JSON.
      auto* e = new QLineEdit(QString::fromStdString(value.is_string() ? value.get<std::string>() : value.dump()));
      const bool as_string = p.kind == nodes::ParamKind::String;
      connect(e, &QLineEdit::editingFinished, this, [this, name, e, as_string] {
        json v = as_string ? json(e->text().toStdString()) : json::parse(e->text().toStdString(), nullptr, false);
        if (v.is_discarded()) {
          Q_EMIT message("parameter '" + QString::fromStdString(name) + "': '" + e->text() + "' is not a value", true);
          return;
        }
        pushParams({{name, v}});
      });
      w = e;
    }
    w->setObjectName(QString::fromStdString("param." + p.name));
    w->setToolTip(QString::fromStdString(p.doc));
    form_->addRow(QString::fromStdString(p.name), w);
  }
}

void Inspector::buildProject() {
  const nodes::Document& doc = model_->doc();
  title_->setText(doc.name.empty() ? QString("Project") : QString::fromStdString(doc.name));
  const nodes::TrainingSpec& t = doc.training;
  auto* epochs = new QSpinBox;
  epochs->setRange(1, 100000);
  epochs->setValue(static_cast<int>(t.epochs));
  epochs->setKeyboardTracking(false);
  connect(epochs, &QSpinBox::valueChanged, this, [this](int v) { pushTraining({{"epochs", v}}); });
  form_->addRow("Epochs", epochs);
  auto* batch = new QSpinBox;
  batch->setRange(1, 1 << 20);
  batch->setValue(static_cast<int>(t.batch_size));
  batch->setKeyboardTracking(false);
  connect(batch, &QSpinBox::valueChanged, this, [this](int v) { pushTraining({{"batch_size", v}}); });
  form_->addRow("Batch size", batch);
  auto* lr = new QDoubleSpinBox;
  lr->setDecimals(6);
  lr->setRange(1e-6, 10);
  lr->setSingleStep(0.001);
  lr->setValue(t.optimizer.lr);
  lr->setKeyboardTracking(false);
  connect(lr, &QDoubleSpinBox::valueChanged, this, [this](double v) { pushTraining({{"optimizer", {{"lr", v}}}}); });
  form_->addRow("Learning rate", lr);
  auto* opt = new QComboBox;
  using nodes::OptimizerType;
  for (OptimizerType o : {OptimizerType::Sgd, OptimizerType::Adam, OptimizerType::AdamW, OptimizerType::RMSprop,
                          OptimizerType::Adagrad})
    opt->addItem(QString::fromStdString(std::string(nodes::to_string(o))));
  opt->setCurrentText(QString::fromStdString(std::string(nodes::to_string(t.optimizer.type))));
  connect(opt, &QComboBox::currentTextChanged, this,
          [this](const QString& v) { pushTraining({{"optimizer", {{"type", v.toStdString()}}}}); });
  form_->addRow("Optimizer", opt);
  auto* ds = new QLabel(QString::fromStdString(doc.dataset.source + (doc.dataset.path.empty() ? "" : ": " + doc.dataset.path)));
  ds->setWordWrap(true);
  form_->addRow("Dataset", ds);
}

}  // namespace mls::editor
