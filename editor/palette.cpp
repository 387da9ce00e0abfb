#include "editor/palette.h"

#include <QMimeData>
#include <QVBoxLayout>
#include <map>

#include "editor/canvas.h"
#include "editor/theme.h"
#include "nodes/catalogue.h"

namespace mls::editor {

namespace {

QString typeToolTip(const nodes::NodeTypeDef& t) {
  QString tip = "<b>" + QString::fromStdString(t.display_name).toHtmlEscaped() + "</b> <code>" +
                QString::fromStdString(t.id) + "</code><br>" +
                QString::fromStdString(t.doc).toHtmlEscaped();
  auto ports = [](const std::vector<nodes::PortDef>& ps) {
    QStringList names;
    for (const auto& p : ps) names << QString::fromStdString(p.name);
    return names.isEmpty() ? QString("—") : names.join(", ");
  };
  tip += "<br><br>Inputs: " + ports(t.inputs) + "<br>Outputs: " + ports(t.outputs);
  if (!t.params.empty()) {
    tip += "<br><br>Parameters:<ul style='margin:0'>";
    for (const auto& p : t.params)
      tip += "<li><b>" + QString::fromStdString(p.name) + "</b>" +
             (p.required ? QString(" (required)")
                         : " = " + QString::fromStdString(p.default_value.dump())) +
             ": " + QString::fromStdString(p.doc).toHtmlEscaped() + "</li>";
    tip += "</ul>";
  }
  return tip;
}

}  // namespace

PaletteTree::PaletteTree(QWidget* parent) : QTreeWidget(parent) {
  setHeaderHidden(true);
  setDragEnabled(true);
  setDragDropMode(DragOnly);
  setRootIsDecorated(true);
  setIndentation(14);
  setUniformRowHeights(true);
}

QStringList PaletteTree::mimeTypes() const {
  return {kNodeTypeMime};
}

QMimeData* PaletteTree::mimeData(const QList<QTreeWidgetItem*>& items) const {
  if (items.isEmpty() || items[0]->data(0, Qt::UserRole).toString().isEmpty()) return nullptr;
  auto* m = new QMimeData;
  m->setData(kNodeTypeMime, items[0]->data(0, Qt::UserRole).toString().toUtf8());
  return m;
}

Palette::Palette(QWidget* parent)
    : QWidget(parent), search_(new QLineEdit), tree_(new PaletteTree) {
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(6, 6, 6, 6);
  lay->setSpacing(6);
  search_->setPlaceholderText("Search nodes (Ctrl+F)");
  search_->setClearButtonEnabled(true);
  lay->addWidget(search_);
  lay->addWidget(tree_);
  std::map<std::string, QTreeWidgetItem*> cats;
  // Categories in the order a model is built: data, layers, activations, merges, losses.
  for (const char* c : {"Data", "Layers", "Activations", "Merge", "Sequence", "Losses"}) {
    auto* item = new QTreeWidgetItem(tree_, {c});
    item->setFlags(Qt::ItemIsEnabled);
    QFont f = item->font(0);
    f.setBold(true);
    item->setFont(0, f);
    item->setForeground(0, categoryColor(c));
    cats[c] = item;
  }
  for (const nodes::NodeTypeDef& t : nodes::builtin_catalogue().all()) {
    QTreeWidgetItem*& cat = cats[t.category];
    if (!cat) cat = new QTreeWidgetItem(tree_, {QString::fromStdString(t.category)});
    auto* item = new QTreeWidgetItem(cat, {QString::fromStdString(t.display_name)});
    item->setData(0, Qt::UserRole, QString::fromStdString(t.id));
    item->setData(0, Qt::UserRole + 1, QString::fromStdString(t.category));
    item->setToolTip(0, typeToolTip(t));
  }
  tree_->expandAll();
  applyIcons();
  connect(search_, &QLineEdit::textChanged, this, &Palette::setFilter);
  connect(tree_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) {
    const QString id = item->data(0, Qt::UserRole).toString();
    if (!id.isEmpty()) Q_EMIT activated(id.toStdString());
  });
}

void Palette::setFilter(const QString& text) {
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* cat = tree_->topLevelItem(i);
    int shown = 0;
    for (int k = 0; k < cat->childCount(); ++k) {
      QTreeWidgetItem* item = cat->child(k);
      const bool match =
          text.isEmpty() || item->text(0).contains(text, Qt::CaseInsensitive) ||
          item->data(0, Qt::UserRole).toString().contains(text, Qt::CaseInsensitive) ||
          cat->text(0).contains(text, Qt::CaseInsensitive);
      item->setHidden(!match);
      shown += match;
    }
    cat->setHidden(shown == 0);
  }
}

void Palette::applyIcons() {
  // Each node type shows its category's icon in the category's colour, as on the canvas.
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* cat = tree_->topLevelItem(i);
    for (int k = 0; k < cat->childCount(); ++k) {
      const std::string c = cat->child(k)->data(0, Qt::UserRole + 1).toString().toStdString();
      cat->child(k)->setIcon(0, category_icon(c, categoryColor(c)));
    }
  }
}

QMimeData* Palette::mimeFor(const std::string& type) const {
  auto* m = new QMimeData;
  m->setData(kNodeTypeMime, QByteArray::fromStdString(type));
  return m;
}

QStringList Palette::visibleTypes() const {
  QStringList out;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* cat = tree_->topLevelItem(i);
    if (cat->isHidden()) continue;
    for (int k = 0; k < cat->childCount(); ++k)
      if (!cat->child(k)->isHidden()) out << cat->child(k)->data(0, Qt::UserRole).toString();
  }
  return out;
}

}  // namespace mls::editor
