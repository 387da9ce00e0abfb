// The node palette: every catalogue type by category, filtered as you type, with the
// type's documentation on hover. Drag a type onto the canvas, or double-click it to add
// it at the centre of the view.
#pragma once

#include <QLineEdit>
#include <QTreeWidget>
#include <QWidget>
#include <string>

class QMimeData;

namespace mls::editor {

class PaletteTree : public QTreeWidget {
  Q_OBJECT
 public:
  explicit PaletteTree(QWidget* parent = nullptr);

 protected:
  QMimeData* mimeData(const QList<QTreeWidgetItem*>& items) const override;
  QStringList mimeTypes() const override;
};

class Palette : public QWidget {
  Q_OBJECT
 public:
  explicit Palette(QWidget* parent = nullptr);
  void setFilter(const QString& text);
  QTreeWidget* tree() const { return tree_; }
  QLineEdit* search() const { return search_; }
  // The visible type ids, in order (for tests and keyboard use).
  QStringList visibleTypes() const;
  // Draws the node types' icons (again after a theme change).
  void applyIcons();
  // What dragging `type` out of the palette carries (the tree makes the same).
  QMimeData* mimeFor(const std::string& type) const;

 Q_SIGNALS:
  void activated(const std::string& type);

 private:
  QLineEdit* search_;
  PaletteTree* tree_;
};

}  // namespace mls::editor
