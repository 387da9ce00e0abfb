// A lab author's edits: each keeps what it replaced, so revert() restores it exactly.
#include "nodes/lab_edit.h"

#include <utility>

namespace mls::nodes {

namespace {

Result<void> author_only(const Document& doc, const std::string& what) {
  if (doc.lab.student)
    return make_error("cannot " + what + ": this is a student's copy of a lab (edit the lab)");
  return {};
}

class SetLab final : public EditCommand {
 public:
  explicit SetLab(LabSpec lab) : lab_(std::move(lab)) {}
  Result<void> apply(Document& doc) override {
    old_ = std::exchange(doc.lab, lab_);
    return {};
  }
  void revert(Document& doc) override { doc.lab = old_; }
  std::string text() const override { return lab_.present ? "Set the lab" : "Remove the lab"; }

 private:
  LabSpec lab_, old_;
};

class SetNodeMarks final : public EditCommand {
 public:
  SetNodeMarks(std::string id, bool locked, bool solution)
      : id_(std::move(id)), locked_(locked), solution_(solution) {}
  Result<void> apply(Document& doc) override {
    auto i = find_node(doc, id_);
    if (!i) return make_error("no node '" + id_ + "'");
    NodeDoc& n = doc.nodes[*i];
    old_ = {n.locked, n.solution};
    n.locked = locked_;
    n.solution = solution_;
    return {};
  }
  void revert(Document& doc) override {
    NodeDoc& n = doc.nodes[*find_node(doc, id_)];
    n.locked = old_.first;
    n.solution = old_.second;
  }
  std::string text() const override {
    if (locked_ && solution_) return "Lock node " + id_ + " as solution";
    if (locked_) return "Lock node " + id_;
    if (solution_) return "Mark node " + id_ + " as solution";
    return "Unmark node " + id_;
  }

 private:
  std::string id_;
  bool locked_, solution_;
  std::pair<bool, bool> old_;
};

}  // namespace

EditResult make_set_lab(const Document& doc, LabSpec lab) {
  if (auto r = author_only(doc, "set the lab"); !r) return r.error();
  if (lab.present) {
    // The loader's rules, through its own parser: one place says what a lab section may hold.
    lab.student = false;
    auto checked = parse_lab(nlohmann::json::parse(lab_to_ordered_json(lab).dump()), "lab");
    if (!checked) return make_error("cannot set the lab: " + checked.error().message);
  } else {
    lab = LabSpec{};
  }
  return std::unique_ptr<EditCommand>(new SetLab(std::move(lab)));
}

EditResult make_set_node_marks(const Document& doc, const std::string& id, bool locked,
                               bool solution) {
  if (auto r = author_only(doc, "mark node '" + id + "'"); !r) return r.error();
  if (!find_node(doc, id)) return make_error("cannot mark node '" + id + "': no such node");
  return std::unique_ptr<EditCommand>(new SetNodeMarks(id, locked, solution));
}

}  // namespace mls::nodes
