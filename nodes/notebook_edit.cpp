// Undoable edits of the notebook: each command keeps the whole notebook as it was before
// apply(), so revert() restores it exactly (order, flags, the present mark).
#include "nodes/notebook_edit.h"

#include <algorithm>

namespace mls::nodes {

namespace {

bool known_view(const std::string& v) {
  return std::any_of(std::begin(kCellViews), std::end(kCellViews),
                     [&](const char* k) { return v == k; });
}

std::string views_list() {
  std::string out;
  for (const char* v : kCellViews) out += std::string(out.empty() ? "'" : ", '") + v + "'";
  return out;
}

// A check of the document followed by a change of its notebook.
class NotebookCommand final : public EditCommand {
 public:
  using Change = std::function<Result<void>(Notebook&)>;
  NotebookCommand(std::string text, Change change)
      : text_(std::move(text)), change_(std::move(change)) {}

  Result<void> apply(Document& doc) override {
    Notebook after = doc.notebook;
    if (auto r = change_(after); !r) return r;
    after.present = true;
    before_ = std::move(doc.notebook);
    doc.notebook = std::move(after);
    return {};
  }
  void revert(Document& doc) override { doc.notebook = before_; }
  std::string text() const override { return text_; }

 private:
  std::string text_;
  Change change_;
  Notebook before_;
};

Result<size_t> cell_index(const Notebook& nb, const std::string& id) {
  auto i = nb.index_of(id);
  if (!i) return make_error("no cell '" + id + "' in the notebook");
  return *i;
}

Result<void> check_cell(const Notebook& nb, const Cell& cell) {
  if (!is_valid_node_id(cell.id))
    return make_error("invalid cell id '" + cell.id + "' (expected [A-Za-z_][A-Za-z0-9_.-]*)");
  if (nb.find(cell.id)) return make_error("a cell '" + cell.id + "' already exists");
  if (cell.kind == CellKind::View && !known_view(cell.view))
    return make_error("view cell '" + cell.id + "': unknown view '" + cell.view + "' (expected " +
                      views_list() + ")");
  if (cell.kind != CellKind::View && !cell.view.empty())
    return make_error(std::string(cell_kind_name(cell.kind)) + " cell '" + cell.id +
                      "' cannot have a view (only a view cell has one)");
  return {};
}

// Runs the change once on a copy, so that the factory refuses what apply() would.
EditResult make(const Document& doc, std::string text, NotebookCommand::Change change) {
  Notebook probe = doc.notebook;
  if (auto r = change(probe); !r) return r.error();
  return std::unique_ptr<EditCommand>(new NotebookCommand(std::move(text), std::move(change)));
}

}  // namespace

std::string fresh_cell_id(const Document& doc) {
  for (size_t n = 1;; ++n) {
    std::string id = "cell" + std::to_string(n);
    if (!doc.notebook.find(id)) return id;
  }
}

EditResult make_add_cell(const Document& doc, size_t index, Cell cell) {
  if (cell.id.empty()) cell.id = fresh_cell_id(doc);
  std::string text = "Add cell " + cell.id;
  return make(doc, std::move(text), [index, cell](Notebook& nb) -> Result<void> {
    if (auto r = check_cell(nb, cell); !r) return r;
    nb.cells.insert(
        nb.cells.begin() + static_cast<std::ptrdiff_t>(std::min(index, nb.cells.size())), cell);
    return {};
  });
}

EditResult make_remove_cell(const Document& doc, const std::string& id) {
  return make(doc, "Remove cell " + id, [id](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    nb.cells.erase(nb.cells.begin() + static_cast<std::ptrdiff_t>(*i));
    return {};
  });
}

EditResult make_move_cell(const Document& doc, const std::string& id, size_t to_index) {
  return make(doc, "Move cell " + id, [id, to_index](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    Cell cell = std::move(nb.cells[*i]);
    nb.cells.erase(nb.cells.begin() + static_cast<std::ptrdiff_t>(*i));
    const size_t to = std::min(to_index, nb.cells.size());
    nb.cells.insert(nb.cells.begin() + static_cast<std::ptrdiff_t>(to), std::move(cell));
    return {};
  });
}

EditResult make_set_cell_source(const Document& doc, const std::string& id, std::string source) {
  return make(doc, "Edit cell " + id, [id, source](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    if (nb.cells[*i].kind == CellKind::View)
      return make_error("view cell '" + id + "' has no source to edit");
    nb.cells[*i].source = source;
    return {};
  });
}

EditResult make_set_cell_on_demand(const Document& doc, const std::string& id, bool on_demand) {
  std::string text =
      on_demand ? "Run cell " + id + " only when asked" : "Run cell " + id + " with its inputs";
  return make(doc, std::move(text), [id, on_demand](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    nb.cells[*i].on_demand = on_demand;
    return {};
  });
}

EditResult make_set_cell_view(const Document& doc, const std::string& id, std::string view) {
  return make(doc, "Show " + view + " in cell " + id, [id, view](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    if (nb.cells[*i].kind != CellKind::View)
      return make_error(std::string(cell_kind_name(nb.cells[*i].kind)) + " cell '" + id +
                        "' cannot show a view (only a view cell can)");
    if (!known_view(view))
      return make_error("view cell '" + id + "': unknown view '" + view + "' (expected " +
                        views_list() + ")");
    nb.cells[*i].view = view;
    return {};
  });
}

EditResult make_set_notebook_lazy(const Document& doc, bool lazy) {
  return make(doc, lazy ? "Lazy notebook" : "Reactive notebook",
              [lazy](Notebook& nb) -> Result<void> {
                nb.lazy = lazy;
                return {};
              });
}

}  // namespace mls::nodes
