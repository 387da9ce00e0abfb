// Labs: the "lab" section, the student's copy, and what the grader compares and runs.
#include "nodes/lab.h"

#include <algorithm>
#include <set>

#include "nodes/document.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;

Error bad(const std::string& source, const std::string& path, const std::string& what) {
  return Error{source + ": " + path + ": " + what};
}

Result<LabGoal> parse_goal(const json& g, const std::string& source, const std::string& path) {
  if (!g.is_object()) return bad(source, path, "a goal is an object {\"id\", \"text\"}");
  for (const auto& [key, value] : g.items())
    if (key != "id" && key != "text" && key != "hidden")
      return bad(source, path + "/" + key,
                 "unknown key '" + key + "' (expected 'id', 'text', 'hidden')");
  LabGoal goal;
  auto id = g.find("id");
  if (id == g.end() || !id->is_string() || !is_valid_node_id(id->get<std::string>()))
    return bad(source, path + "/id", "a goal needs an \"id\" matching [A-Za-z_][A-Za-z0-9_.-]*");
  goal.id = id->get<std::string>();
  auto text = g.find("text");
  if (text == g.end() || !text->is_string() || text->get<std::string>().empty())
    return bad(source, path + "/text", "a goal needs a \"text\" that says what is checked");
  goal.text = text->get<std::string>();
  if (auto h = g.find("hidden"); h != g.end()) {
    if (!h->is_boolean()) return bad(source, path + "/hidden", "must be true or false");
    goal.hidden = h->get<bool>();
  }
  return goal;
}

const Cell* find_cell(const Notebook& nb, const std::string& id) { return nb.find(id); }

// A node's inputs as "port<-node:port" lines, sorted.
std::vector<std::string> input_links(const Document& d, const std::string& node) {
  std::vector<std::string> out;
  for (const LinkDoc& l : d.links)
    if (l.to_node == node) out.push_back(l.to_port + "<-" + l.from_node + ":" + l.from_port);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

const LabGoal* LabSpec::find(const std::string& id) const {
  for (const LabGoal& g : goals)
    if (g.id == id) return &g;
  return nullptr;
}

Result<LabSpec> parse_lab(const json& j, const std::string& source_name) {
  const std::string path = "/lab";
  if (!j.is_object()) return bad(source_name, path, "must be an object");
  LabSpec lab;
  lab.present = true;
  for (const auto& [key, value] : j.items()) {
    const std::string where = path + "/" + key;
    if (key == "title") {
      if (!value.is_string()) return bad(source_name, where, "must be a string");
      lab.title = value.get<std::string>();
    } else if (key == "goals") {
      if (!value.is_array()) return bad(source_name, where, "must be an array of goals");
      std::set<std::string> ids;
      for (size_t i = 0; i < value.size(); ++i) {
        auto g = parse_goal(value[i], source_name, where + "/" + std::to_string(i));
        if (!g) return g.error();
        if (!ids.insert(g->id).second)
          return bad(source_name, where + "/" + std::to_string(i) + "/id",
                     "duplicate goal id '" + g->id + "'");
        lab.goals.push_back(std::move(*g));
      }
    } else if (key == "time_limit_s") {
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > 86400)
        return bad(source_name, where, "must be a number of seconds in (0, 86400]");
      lab.time_limit_s = value.get<double>();
    } else if (key == "memory_mb") {
      if (!value.is_number_integer() || value.get<int64_t>() < 64 ||
          value.get<int64_t>() > (int64_t{1} << 20))
        return bad(source_name, where, "must be a whole number of MiB, at least 64");
      lab.memory_mb = value.get<int64_t>();
    } else if (key == "student") {
      if (!value.is_boolean()) return bad(source_name, where, "must be true or false");
      lab.student = value.get<bool>();
    } else {
      return bad(source_name, where,
                 "unknown key '" + key +
                     "' (expected 'title', 'goals', 'time_limit_s', 'memory_mb', 'student')");
    }
  }
  return lab;
}

nlohmann::ordered_json lab_to_ordered_json(const LabSpec& lab) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["title"] = lab.title;
  nlohmann::ordered_json goals = nlohmann::ordered_json::array();
  for (const LabGoal& g : lab.goals) {
    nlohmann::ordered_json goal = {{"id", g.id}, {"text", g.text}};
    if (g.hidden) goal["hidden"] = true;
    goals.push_back(std::move(goal));
  }
  out["goals"] = std::move(goals);
  if (lab.time_limit_s != LabSpec{}.time_limit_s) out["time_limit_s"] = lab.time_limit_s;
  if (lab.memory_mb != LabSpec{}.memory_mb) out["memory_mb"] = lab.memory_mb;
  if (lab.student) out["student"] = true;
  return out;
}

bool cell_editable(CellRole role) { return role == CellRole::Free || role == CellRole::Answer; }
bool is_check(CellRole role) { return role == CellRole::Check || role == CellRole::HiddenCheck; }

Result<Document> pack_student(const Document& lab) {
  if (!lab.lab.present)
    return make_error("this project is not a lab (it has no \"lab\" section with goals)");
  if (lab.lab.student)
    return make_error("this is already a student's copy (\"lab\": {\"student\": true}); pack the "
                      "teacher's lab, which holds the solutions");
  Document out = lab;
  out.lab.student = true;
  std::erase_if(out.lab.goals, [](const LabGoal& g) { return g.hidden; });
  std::erase_if(out.notebook.cells,
                [](const Cell& c) { return c.role == CellRole::HiddenCheck; });
  for (Cell& c : out.notebook.cells)
    if (c.role == CellRole::Answer) c.source = c.starter;
  std::set<std::string> gone;
  for (const NodeDoc& n : out.nodes)
    if (n.solution) gone.insert(n.id);
  std::erase_if(out.nodes, [&](const NodeDoc& n) { return gone.count(n.id) > 0; });
  std::erase_if(out.links, [&](const LinkDoc& l) {
    return gone.count(l.from_node) > 0 || gone.count(l.to_node) > 0;
  });
  if (out.layout.is_object())
    for (const std::string& id : gone) out.layout.erase(id);
  return out;
}

std::vector<std::string> lock_differences(const Document& lab, const Document& sub) {
  std::vector<std::string> out;
  for (const Cell& c : lab.notebook.cells) {
    if (c.role != CellRole::Locked && c.role != CellRole::Check) continue;
    const char* what = c.role == CellRole::Check ? "check cell" : "locked cell";
    const Cell* s = find_cell(sub.notebook, c.id);
    if (!s)
      out.push_back(std::string(what) + " '" + c.id + "' was removed");
    else if (s->role != c.role || s->kind != c.kind)
      out.push_back(std::string(what) + " '" + c.id + "' was unlocked (its role was changed)");
    else if (s->source != c.source || s->view != c.view)
      out.push_back(std::string(what) + " '" + c.id + "' was edited");
  }
  for (const Cell& c : sub.notebook.cells) {
    const Cell* l = find_cell(lab.notebook, c.id);
    if (c.role == CellRole::Locked && !(l && l->role == CellRole::Locked))
      out.push_back("cell '" + c.id + "' was marked locked (the lab has no such locked cell)");
  }
  if (sub.dataset != lab.dataset) out.push_back("the dataset was changed");
  if (sub.weights != lab.weights) out.push_back("the initial weights were changed");
  for (const NodeDoc& n : lab.nodes) {
    if (!n.locked) continue;
    auto i = find_node(sub, n.id);
    if (!i) {
      out.push_back("locked node '" + n.id + "' was removed");
      continue;
    }
    const NodeDoc& s = sub.nodes[*i];
    std::vector<std::string> changed;
    if (s.type != n.type) changed.push_back("type");
    if (s.params != n.params) changed.push_back("params");
    if (s.device != n.device) changed.push_back("device");
    if (!s.locked) changed.push_back("unlocked");
    if (!changed.empty()) {
      std::string list;
      for (const auto& c : changed) list += (list.empty() ? "" : ", ") + c;
      out.push_back("locked node '" + n.id + "' was changed (" + list + ")");
    }
    if (input_links(lab, n.id) != input_links(sub, n.id))
      out.push_back("the inputs of locked node '" + n.id + "' were relinked");
  }
  return out;
}

Document graded_project(const Document& lab, const Document& sub) {
  Document out = sub;
  out.dataset = lab.dataset;
  out.weights = lab.weights;
  // A student's copy, whatever the file says: the project's edit commands (mls.project
  // from a cell) refuse its locked parts while it is graded.
  out.lab = lab.lab;
  out.lab.student = true;
  for (const NodeDoc& n : lab.nodes)
    if (n.locked)
      if (auto i = find_node(out, n.id)) {
        NodeDoc& s = out.nodes[*i];
        s.type = n.type;
        s.version = n.version;
        s.params = n.params;
        s.device = n.device;
        s.locked = true;
      }
  return out;
}

Notebook graded_notebook(const Document& lab, const Document& sub) {
  Notebook out = sub.notebook;
  out.present = true;
  std::set<std::string> lab_checks;
  for (const Cell& c : lab.notebook.cells)
    if (is_check(c.role)) lab_checks.insert(c.id);
  // The submission's checks are not trusted: the lab's run instead.
  std::erase_if(out.cells, [&](const Cell& c) { return is_check(c.role) || lab_checks.count(c.id); });
  // A cell the submission marked locked is the student's (locked cells' globals are what
  // checks read: scripting/notebook/lab_checks.h).
  for (Cell& c : out.cells)
    if (c.role == CellRole::Locked) c.role = CellRole::Free;
  // Locked cells: the lab's text wherever the submission has the id; put back when removed.
  for (size_t li = 0; li < lab.notebook.cells.size(); ++li) {
    const Cell& c = lab.notebook.cells[li];
    if (c.role != CellRole::Locked) continue;
    if (auto at = out.index_of(c.id)) {
      out.cells[*at] = c;
      continue;
    }
    size_t insert = 0;  // after the nearest earlier lab cell the notebook has
    for (size_t k = li; k-- > 0;)
      if (auto at = out.index_of(lab.notebook.cells[k].id)) {
        insert = *at + 1;
        break;
      }
    out.cells.insert(out.cells.begin() + static_cast<std::ptrdiff_t>(insert), c);
  }
  for (const Cell& c : lab.notebook.cells)
    if (is_check(c.role)) out.cells.push_back(c);
  return out;
}

std::string locked_parts_text(const Document& lab) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["goals"] = lab_to_ordered_json(lab.lab)["goals"];
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const Cell& c : lab.notebook.cells)
    if (c.role == CellRole::Locked || is_check(c.role))
      cells.push_back({{"id", c.id}, {"role", std::string(cell_role_name(c.role))},
                       {"kind", std::string(cell_kind_name(c.kind))}, {"source", c.source},
                       {"view", c.view}});
  j["cells"] = std::move(cells);
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const NodeDoc& n : lab.nodes)
    if (n.locked)
      nodes.push_back({{"id", n.id}, {"type", n.type}, {"params", n.params.dump()},
                       {"device", n.device}, {"inputs", input_links(lab, n.id)}});
  j["nodes"] = std::move(nodes);
  return j.dump();
}

}  // namespace mls::nodes
