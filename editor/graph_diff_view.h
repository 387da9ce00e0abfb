// Two runs' graphs side by side, drawn as the canvas draws them (read-only canvases over the
// documents the runs trained: RunStore::snapshot), with what changed marked: on the left run
// A, its removed nodes red; on the right run B, its added nodes green; changed nodes (other
// parameters, type, device or an input link) amber on both. The diff's lines are listed
// below (nodes/document_diff.h, as `mlstudio runs diff A B` prints them).
//
//   auto* diff = new GraphDiffView;
//   diff->showRuns("mlstudio-runs.db", 3, 4);   // read on a worker; loaded() when drawn
#pragma once

#include <QWidget>
#include <string>
#include <vector>

#include "nodes/document_diff.h"

class QGraphicsView;
class QLabel;
class QListWidget;

namespace mls::editor {

class CanvasScene;
class DocumentModel;

class GraphDiffView : public QWidget {
  Q_OBJECT
 public:
  explicit GraphDiffView(QWidget* parent = nullptr);
  ~GraphDiffView() override;

  // Reads both runs' snapshots from `db` on a worker thread. A run without a snapshot, or
  // one that trained a Lua script, is said in the message line.
  void showRuns(const std::string& db, int64_t a, int64_t b);
  // Both documents at hand (what showRuns does once they are read).
  void showDocuments(const nodes::Document& a, const QString& a_title, const nodes::Document& b,
                     const QString& b_title);

  const nodes::DocumentDiff& diff() const { return diff_; }
  QListWidget* lines() const { return lines_; }
  QString message() const;
  CanvasScene* scene(int side) const { return side == 0 ? scene_a_ : scene_b_; }
  QGraphicsView* view(int side) const { return side == 0 ? view_a_ : view_b_; }
  // The mark drawn on a node of side 0 (A) or 1 (B): "added", "removed", "changed" or "".
  QString markOf(int side, const std::string& node) const;

 Q_SIGNALS:
  void loaded();

 private:
  void mark();
  void fit();

  DocumentModel *model_a_, *model_b_;
  CanvasScene *scene_a_, *scene_b_;
  QGraphicsView *view_a_, *view_b_;
  QLabel *title_a_, *title_b_, *message_;
  QListWidget* lines_;
  nodes::DocumentDiff diff_;
  std::vector<std::pair<std::string, QString>> marks_[2];
  int request_ = 0;
};

}  // namespace mls::editor
