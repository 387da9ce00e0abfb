// The run browser's Lineage tab: the selected run's ancestors and forks as a tree (a fork
// continues its parent's checkpoint at a step; `mlstudio runs fork`), read from the parent
// and fork_step attributes through the run table.
#include <QTreeWidget>
#include <set>

#include "editor/run_browser.h"
#include "editor/run_table_model.h"

namespace mls::editor {

LineageNode run_family(
    int64_t run, const std::map<int64_t, std::pair<int64_t, std::optional<int64_t>>>& parents) {
  // Up to the oldest ancestor (a cycle cannot be recorded, but a broken file must not hang us).
  int64_t root = run;
  std::set<int64_t> seen{run};
  for (auto it = parents.find(root); it != parents.end(); it = parents.find(root)) {
    if (!seen.insert(it->second.first).second) break;
    root = it->second.first;
  }
  std::map<int64_t, std::vector<int64_t>> children;
  for (const auto& [child, parent] : parents) children[parent.first].push_back(child);
  std::set<int64_t> placed;
  auto build = [&](auto&& self, int64_t id) -> LineageNode {
    LineageNode n;
    n.id = id;
    placed.insert(id);
    if (auto p = parents.find(id); p != parents.end() && id != root) n.fork_step = p->second.second;
    for (int64_t c : children[id])  // by id: std::map keeps them sorted
      if (!placed.count(c)) n.children.push_back(self(self, c));
    return n;
  };
  return build(build, root);
}

void RunBrowser::showLineage() {
  const std::vector<int64_t> ids = selectedRuns();
  const int request = ++lineage_request_;
  if (ids.size() != 1 || !model_->isOpen()) {
    lineage_->clear();
    return;
  }
  const int64_t run = ids[0];
  // Every run that has a parent (few: forks and resumed copies), then the family's rows.
  store::RunQuery q;
  q.where = "parent > 0";
  q.columns = {"parent", "fork_step"};
  model_->rows(q, 1'000'000, [this, run, request](Result<std::vector<store::RunRow>> rows) {
    if (request != lineage_request_ || !rows) return;
    std::map<int64_t, std::pair<int64_t, std::optional<int64_t>>> parents;
    for (const store::RunRow& r : *rows) {
      if (r.cells.size() < 2 || r.cells[0].kind != store::Cell::Kind::Number) continue;
      std::optional<int64_t> step;
      if (r.cells[1].kind == store::Cell::Kind::Number)
        step = static_cast<int64_t>(r.cells[1].number);
      parents[r.id] = {static_cast<int64_t>(r.cells[0].number), step};
    }
    const LineageNode family = run_family(run, parents);
    std::string where;
    auto collect = [&](auto&& self, const LineageNode& n) -> void {
      where += (where.empty() ? "id = " : " OR id = ") + std::to_string(n.id);
      for (const LineageNode& c : n.children) self(self, c);
    };
    collect(collect, family);
    store::RunQuery info;
    info.where = where;
    info.columns = {"status", "name"};
    model_->rows(
        info, 10'000, [this, run, request, family](Result<std::vector<store::RunRow>> rows) {
          if (request != lineage_request_) return;
          std::map<int64_t, std::pair<QString, QString>> about;
          if (rows)
            for (const store::RunRow& r : *rows)
              if (r.cells.size() >= 2)
                about[r.id] = {QString::fromStdString(r.cells[0].display()),
                               QString::fromStdString(r.cells[1].display())};
          lineage_->clear();
          auto add = [&](auto&& self, const LineageNode& n, QTreeWidgetItem* parent) -> void {
            auto* item = parent ? new QTreeWidgetItem(parent) : new QTreeWidgetItem(lineage_);
            item->setText(0, QString("run %1").arg(n.id));
            item->setData(0, Qt::UserRole, QVariant::fromValue<qlonglong>(n.id));
            item->setText(1, n.fork_step ? QString::number(*n.fork_step) : QString());
            item->setText(2, about[n.id].first);
            item->setText(3, about[n.id].second);
            if (n.id == run) {
              QFont bold = item->font(0);
              bold.setBold(true);
              for (int c = 0; c < 4; ++c) item->setFont(c, bold);
            }
            for (const LineageNode& c : n.children) self(self, c, item);
          };
          add(add, family, nullptr);
          lineage_->expandAll();
          lineage_->resizeColumnToContents(0);
        });
  });
}

}  // namespace mls::editor
