#include "editor/inspector.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <cmath>
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

namespace {

// How a parameter is edited: by its kind, unless the value is not one of that kind (a kernel
// size [3, 3]), which is edited as JSON text.
const char* field_kind(const nodes::ParamDef& p, const json& value) {
  if (p.kind == nodes::ParamKind::Bool && value.is_boolean()) return "bool";
  if (p.kind == nodes::ParamKind::Enum) return "enum";
  if (p.kind == nodes::ParamKind::Int && value.is_number_integer()) return "int";
  if (p.kind == nodes::ParamKind::Float && value.is_number()) return "float";
  return "text";
}

json param_value(const nodes::NodeDoc& n, const nodes::ParamDef& p) {
  return n.params.contains(p.name) ? n.params[p.name] : p.default_value;
}

QString text_of(const json& value) {
  return QString::fromStdString(value.is_string() ? value.get<std::string>() : value.dump());
}

}  // namespace

json Inspector::formKey(const json& shown) const {
  if (!shown.contains("type")) return "project";
  json key = json::array({shown["type"]});
  const nodes::NodeTypeDef* def = nodes::builtin_catalogue().find(shown["type"].get<std::string>());
  if (!def) return key;
  for (const nodes::ParamDef& p : def->params) {
    const json& params = shown["params"];
    key.push_back(field_kind(p, params.contains(p.name) ? params[p.name] : p.default_value));
  }
  return key;
}

void Inspector::addSync(QWidget* w, std::function<void()> sync) {
  syncs_.push_back([w, sync = std::move(sync)] {
    const QSignalBlocker block(w);  // showing the document's value is not an edit
    sync();
  });
}

void Inspector::refresh() {
  const nodes::Document& doc = model_->doc();
  if (!node_id_.empty() && !nodes::find_node(doc, node_id_)) node_id_.clear();
  json now;
  if (!node_id_.empty()) {
    const auto& n = doc.nodes[*nodes::find_node(doc, node_id_)];
    now = {{"id", n.id}, {"type", n.type}, {"params", n.params}, {"device", n.device}};
    title_->setText(QString::fromStdString(n.id));
  } else {
    now = {{"training", nlohmann::json(nodes::training_json(doc.training))}, {"name", doc.name}};
    title_->setText(doc.name.empty() ? QString("Project") : QString::fromStdString(doc.name));
  }
  // Shapes and errors change with other nodes; the fields only when this node's data does,
  // and then in place: the field whose signal brought us here must outlive it.
  if (now != shown_) {
    shown_ = now;
    json key = formKey(now);
    if (form_ && key == form_key_) {
      for (const auto& sync : syncs_) sync();
    } else {
      form_key_ = std::move(key);
      rebuild();
    }
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
  if (form_host_) {
    // Possibly inside a signal of one of its fields: cut them off from the document now
    // (hiding a focused field would commit it again, to the node shown next) and delete them
    // once that signal has returned.
    for (QWidget* w : form_host_->findChildren<QWidget*>()) w->disconnect(this);
    form_host_->hide();
    layout()->removeWidget(form_host_);
    form_host_->deleteLater();
  }
  syncs_.clear();
  form_host_ = new QWidget;
  form_ = new QFormLayout(form_host_);
  form_->setContentsMargins(0, 0, 0, 0);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  static_cast<QVBoxLayout*>(layout())->insertWidget(2, form_host_);
  if (node_id_.empty()) buildProject();
  else buildNode(model_->doc().nodes[*nodes::find_node(model_->doc(), node_id_)]);
  for (const auto& sync : syncs_) sync();
}

const nodes::NodeDoc& Inspector::node() const {
  const nodes::Document& doc = model_->doc();
  return doc.nodes[*nodes::find_node(doc, node_id_)];
}

void Inspector::buildNode(const nodes::NodeDoc& n) {
  const nodes::NodeTypeDef* def = nodes::builtin_catalogue().find(n.type);
  auto* id_edit = new QLineEdit;
  id_edit->setObjectName("inspector.id");
  form_->addRow("Id", id_edit);
  addSync(id_edit, [this, id_edit] {
    const QString id = QString::fromStdString(node_id_);
    if (id_edit->text() != id) id_edit->setText(id);
  });
  connect(id_edit, &QLineEdit::editingFinished, this, [this, id_edit] {
    const std::string new_id = id_edit->text().toStdString();
    if (new_id == node_id_) return;
    auto r = model_->push(nodes::make_rename_node(model_->doc(), node_id_, new_id));
    if (!r) {
      Q_EMIT message(QString::fromStdString(r.error().message), true);
      shown_ = nullptr;
      refresh();
      return;
    }
    // The canvas dropped its selection with the old name: stay on the node.
    node_id_ = new_id;
    refresh();
  });
  form_->addRow("Type", new QLabel(QString::fromStdString(def ? def->display_name + "  (" + n.type + ")" : n.type)));
  // Where it runs when the project trains on a GPU: there, or on the CPU (with copies).
  auto* device = new QComboBox;
  device->setObjectName("inspector.device");
  device->addItem("project's device", QString());
  device->addItem("cpu", QString("cpu"));
  device->setToolTip("Run this node on the project's device, or on the CPU while the rest trains on a GPU "
                     "(its operands are copied there and back each step)");
  addSync(device, [this, device] { device->setCurrentIndex(node().device == "cpu" ? 1 : 0); });
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
    const std::string kind = field_kind(p, param_value(n, p));
    QWidget* w = nullptr;
    const std::string name = p.name;
    if (kind == "bool") {
      auto* c = new QCheckBox;
      addSync(c, [this, c, p] { c->setChecked(param_value(node(), p).get<bool>()); });
      connect(c, &QCheckBox::toggled, this, [this, name](bool on) { pushParams({{name, on}}); });
      w = c;
    } else if (kind == "enum") {
      auto* c = new QComboBox;
      for (const auto& choice : p.choices) c->addItem(QString::fromStdString(choice));
      addSync(c, [this, c, p] {
        const json v = param_value(node(), p);
        if (v.is_string()) c->setCurrentText(QString::fromStdString(v.get<std::string>()));
      });
      connect(c, &QComboBox::currentTextChanged, this, [this, name](const QString& t) { pushParams({{name, t.toStdString()}}); });
      w = c;
    } else if (kind == "int") {
      auto* s = new QSpinBox;
      s->setRange(p.min ? static_cast<int>(*p.min) : -1000000000,
                  p.max ? static_cast<int>(*p.max) : 1000000000);
      s->setKeyboardTracking(false);
      addSync(s, [this, s, p] {
        const int v = static_cast<int>(param_value(node(), p).get<int64_t>());
        if (s->value() != v) s->setValue(v);
      });
      connect(s, &QSpinBox::valueChanged, this, [this, name](int v) { pushParams({{name, v}}); });
      w = s;
    } else if (kind == "float") {
      auto* s = new RealSpinBox;
      s->setRange(p.min.value_or(-1e9), p.max.value_or(1e9));
      s->setSingleStep(0.01);
      addSync(s, [this, s, p] {
        const double v = param_value(node(), p).get<double>();
        if (s->value() != v) s->setValue(v);
      });
      connect(s, &QDoubleSpinBox::valueChanged, this, [this, name](double v) { pushParams({{name, v}}); });
      w = s;
    } else {
      // Strings, and values that are not one scalar (a kernel size [3, 3]): edited as JSON.
      auto* e = new QLineEdit;
      const bool as_string = p.kind == nodes::ParamKind::String;
      addSync(e, [this, e, p] {
        const QString t = text_of(param_value(node(), p));
        if (e->text() != t) e->setText(t);
      });
      connect(e, &QLineEdit::editingFinished, this, [this, p, e, as_string] {
        const std::string& name = p.name;
        json v = as_string ? json(e->text().toStdString()) : json::parse(e->text().toStdString(), nullptr, false);
        if (v.is_discarded()) {
          Q_EMIT message("parameter '" + QString::fromStdString(name) + "': '" + e->text() + "' is not a value", true);
          return;
        }
        if (v != param_value(node(), p)) pushParams({{name, v}});
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
  const auto training = [this]() -> const nodes::TrainingSpec& { return model_->doc().training; };
  auto* epochs = new QSpinBox;
  epochs->setObjectName("training.epochs");
  epochs->setRange(1, 100000);
  epochs->setKeyboardTracking(false);
  addSync(epochs, [epochs, training] { epochs->setValue(static_cast<int>(training().epochs)); });
  connect(epochs, &QSpinBox::valueChanged, this, [this](int v) { pushTraining({{"epochs", v}}); });
  form_->addRow("Epochs", epochs);
  auto* batch = new QSpinBox;
  batch->setObjectName("training.batch_size");
  batch->setRange(1, 1 << 20);
  batch->setKeyboardTracking(false);
  addSync(batch, [batch, training] { batch->setValue(static_cast<int>(training().batch_size)); });
  connect(batch, &QSpinBox::valueChanged, this, [this](int v) { pushTraining({{"batch_size", v}}); });
  form_->addRow("Batch size", batch);
  auto* lr = new RealSpinBox;
  lr->setObjectName("training.lr");
  lr->setSingleStep(0.001);
  addSync(lr, [lr, training] { lr->setValue(training().optimizer.lr); });
  connect(lr, &QDoubleSpinBox::valueChanged, this, [this](double v) { pushTraining({{"optimizer", {{"lr", v}}}}); });
  form_->addRow("Learning rate", lr);
  auto* opt = new QComboBox;
  opt->setObjectName("training.optimizer");
  using nodes::OptimizerType;
  for (OptimizerType o : {OptimizerType::Sgd, OptimizerType::Adam, OptimizerType::AdamW, OptimizerType::RMSprop,
                          OptimizerType::Adagrad})
    opt->addItem(QString::fromStdString(std::string(nodes::to_string(o))));
  addSync(opt, [opt, training] {
    opt->setCurrentText(
        QString::fromStdString(std::string(nodes::to_string(training().optimizer.type))));
  });
  connect(opt, &QComboBox::currentTextChanged, this,
          [this](const QString& v) { pushTraining({{"optimizer", {{"type", v.toStdString()}}}}); });
  form_->addRow("Optimizer", opt);
  auto* ds = new QLabel;
  ds->setWordWrap(true);
  addSync(ds, [this, ds] {
    const auto& d = model_->doc().dataset;
    ds->setText(QString::fromStdString(d.source + (d.path.empty() ? "" : ": " + d.path)));
  });
  form_->addRow("Dataset", ds);
  (void)doc;
}

// [SECTION] RealSpinBox

RealSpinBox::RealSpinBox(QWidget* parent) : QDoubleSpinBox(parent) {
  // QDoubleSpinBox rounds every value to its decimals: enough for a rate of 1e-20.
  setDecimals(30);
  setRange(std::numeric_limits<double>::min(), 1e300);
  setKeyboardTracking(false);
}

QString RealSpinBox::textFromValue(double value) const {
  return QString::number(value, 'g', QLocale::FloatingPointShortest);
}

double RealSpinBox::valueFromText(const QString& text) const {
  return text.trimmed().toDouble();
}

QValidator::State RealSpinBox::validate(QString& text, int&) const {
  const QString t = text.trimmed();
  bool ok = false;
  const double v = t.toDouble(&ok);
  if (ok && std::isfinite(v))
    return v >= minimum() && v <= maximum() ? QValidator::Acceptable : QValidator::Intermediate;
  // On the way to a number: "", "-", "1.", "1e", "1e-".
  static const QRegularExpression partial("^[+-]?[0-9]*\\.?[0-9]*([eE][+-]?[0-9]*)?$");
  return partial.match(t).hasMatch() ? QValidator::Intermediate : QValidator::Invalid;
}

void RealSpinBox::fixup(QString& text) const {
  // Out of range or unfinished: back to the value shown (the document's), not to a bound.
  text = textFromValue(value());
}

}  // namespace mls::editor
