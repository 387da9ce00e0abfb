// Undoable edits of the notebook: each command keeps the whole notebook as it was before
// apply(), so revert() restores it exactly (order, flags, the present mark).
#include "nodes/notebook_edit.h"

namespace mls::nodes {

namespace {

// A check of the document followed by a change of its notebook. Commands with a merge key
// ("cell ID source") set the whole of what they change, so a merged command keeps the state
// before the first and redoes with the change of the last.
class NotebookCommand final : public EditCommand {
 public:
  using Change = std::function<Result<void>(Notebook&)>;
  NotebookCommand(std::string text, Change change, std::string merge_key = {})
      : text_(std::move(text)), change_(std::move(change)), merge_key_(std::move(merge_key)) {}

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
  std::string merge_key() const override { return merge_key_; }
  bool merge_with(const EditCommand& next) override {
    const auto* n = dynamic_cast<const NotebookCommand*>(&next);
    if (!n || merge_key_.empty() || n->merge_key_ != merge_key_) return false;
    change_ = n->change_;
    return true;
  }
  bool changes_nothing(const Document& doc) const override { return doc.notebook == before_; }

 private:
  std::string text_;
  Change change_;
  std::string merge_key_;
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
  if (cell.kind == CellKind::View && !is_cell_view(cell.view))
    return make_error("view cell '" + cell.id + "': unknown view '" + cell.view + "' (expected " +
                      cell_views_list() + ")");
  if (cell.kind != CellKind::View && !cell.view.empty())
    return make_error(std::string(cell_kind_name(cell.kind)) + " cell '" + cell.id +
                      "' cannot have a view (only a view cell has one)");
  return {};
}

// Runs the change once on a copy, so that the factory refuses what apply() would.
EditResult make(const Document& doc, std::string text, NotebookCommand::Change change,
                std::string merge_key = {}) {
  Notebook probe = doc.notebook;
  if (auto r = change(probe); !r) return r.error();
  return std::unique_ptr<EditCommand>(
      new NotebookCommand(std::move(text), std::move(change), std::move(merge_key)));
}

// In a student's copy of a lab (LabSpec::student) only ordinary and answer cells change;
// answer cells stay where they are, so the grader finds them.
Result<void> lab_allows(const Document& doc, const std::string& id, const char* verb,
                        bool answers_too) {
  if (!doc.lab.student) return {};
  const Cell* c = doc.notebook.find(id);
  if (!c || c->role == CellRole::Free) return {};
  if (answers_too && c->role == CellRole::Answer) return {};
  return make_error("cell '" + id + "' is " +
                    (c->role == CellRole::Answer ? std::string("an answer cell of the lab")
                                                 : "locked by the lab (" +
                                                       std::string(cell_role_name(c->role)) + ")") +
                    ": it cannot be " + verb);
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
  if (doc.lab.student && cell.role != CellRole::Free)
    return make_error("cannot add cell '" + cell.id + "' as " +
                      std::string(cell_role_name(cell.role)) +
                      ": a student's copy of a lab adds ordinary cells only");
  std::string text = "Add cell " + cell.id;
  return make(doc, std::move(text), [index, cell](Notebook& nb) -> Result<void> {
    if (auto r = check_cell(nb, cell); !r) return r;
    nb.cells.insert(
        nb.cells.begin() + static_cast<std::ptrdiff_t>(std::min(index, nb.cells.size())), cell);
    return {};
  });
}

EditResult make_remove_cell(const Document& doc, const std::string& id) {
  if (auto r = lab_allows(doc, id, "removed", false); !r) return r.error();
  return make(doc, "Remove cell " + id, [id](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    nb.cells.erase(nb.cells.begin() + static_cast<std::ptrdiff_t>(*i));
    return {};
  });
}

EditResult make_move_cell(const Document& doc, const std::string& id, size_t to_index) {
  if (auto r = lab_allows(doc, id, "moved", false); !r) return r.error();
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
  if (auto r = lab_allows(doc, id, "edited", true); !r) return r.error();
  // Typing into a cell is a run of these: one merge key per cell (kMergeIdle).
  return make(
      doc, "Edit cell " + id,
      [id, source](Notebook& nb) -> Result<void> {
        auto i = cell_index(nb, id);
        if (!i) return i.error();
        if (nb.cells[*i].kind == CellKind::View)
          return make_error("view cell '" + id + "' has no source to edit");
        nb.cells[*i].source = source;
        return {};
      },
      "cell " + id + " source");
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
  if (auto r = lab_allows(doc, id, "changed", false); !r) return r.error();
  return make(doc, "Show " + view + " in cell " + id, [id, view](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    if (nb.cells[*i].kind != CellKind::View)
      return make_error(std::string(cell_kind_name(nb.cells[*i].kind)) + " cell '" + id +
                        "' cannot show a view (only a view cell can)");
    if (!is_cell_view(view))
      return make_error("view cell '" + id + "': unknown view '" + view + "' (expected " +
                        cell_views_list() + ")");
    nb.cells[*i].view = view;
    return {};
  });
}

EditResult make_set_cell_role(const Document& doc, const std::string& id, CellRole role,
                              std::string starter) {
  if (doc.lab.student)
    return make_error("cell '" + id +
                      "': a student's copy of a lab cannot change a cell's role (edit the lab)");
  std::string name(cell_role_name(role));
  std::string text = role == CellRole::Free ? "Make cell " + id + " ordinary"
                                            : "Make cell " + id + " " + name;
  return make(doc, std::move(text), [id, role, starter](Notebook& nb) -> Result<void> {
    auto i = cell_index(nb, id);
    if (!i) return i.error();
    Cell& c = nb.cells[*i];
    if (c.kind != CellKind::Lua && role != CellRole::Free && role != CellRole::Locked)
      return make_error(std::string(cell_kind_name(c.kind)) + " cell '" + id +
                        "' can only be locked (answers and checks are Lua cells)");
    c.role = role;
    c.starter = role == CellRole::Answer ? starter : std::string();
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
