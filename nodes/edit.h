// Edit commands on a project document, with undo and redo. Every change to a project's
// node graph, layout and settings goes through one of these, so the editor (which wraps
// them in a QUndoStack), the Lua `mls.project` API and the tests all edit the same way.
//
//   Document doc;
//   UndoStack stack;
//   stack.set_on_change([&] { canvas.refresh(doc); });
//   Result<void> r = stack.push(make_add_node(doc, "image", "mls.input"), doc);
//   if (r) r = stack.push(make_add_node(doc, "fc1", "mls.linear", {{"out_features", 256}}), doc);
//   if (r) r = stack.push(make_connect(doc, "image:out", "fc1:in"), doc);
//   r = stack.push(make_connect(doc, "fc1:out", "fc1:in"), doc);   // refused, doc unchanged:
//   // "cannot link 'fc1:out' to 'fc1:in': input 'fc1:in' is already linked (from
//   // 'image:out'); disconnect it first"
//   stack.undo_text();   // "Connect image:out to fc1:in"
//   stack.undo(doc);     // the link is gone again; stack.redo(doc) puts it back
//
// A factory checks the edit against the document and the catalogue and says why it is
// refused, naming the node and port. A command is made for the document as it is now:
// apply() it to that document (UndoStack::push does), and revert() it only to the document
// as apply() left it; the stack keeps to that order. apply() checks again and changes
// nothing when it fails; revert() restores the document exactly (node order, link order,
// params, layout), so undoing everything gives back a document that saves byte for byte
// as before. Commands hold no pointer into the document, and the catalogue a factory was
// given must outlive its command.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "nodes/catalogue.h"
#include "nodes/document.h"

namespace mls::nodes {

class EditCommand {
 public:
  virtual ~EditCommand() = default;
  // Checks the edit still fits the document and makes it; on failure nothing changes.
  virtual Result<void> apply(Document& doc) = 0;
  // Undoes the last apply(); the document must be as apply() left it.
  virtual void revert(Document& doc) = 0;
  // A short description for menus: "Add node fc1 (mls.linear)".
  virtual std::string text() const = 0;

  // Edits that a person makes as one (the keystrokes typed into one cell) share a non-empty
  // merge key ("cell data source"); a history joins a pushed command into the step before it
  // when the keys match (see kMergeIdle for when). "" (the default): never merged.
  virtual std::string merge_key() const { return {}; }
  // Takes `next` (same merge key, applied right after this one) into this command, so that
  // one revert() undoes both and one apply() redoes both. False: they stay two steps.
  virtual bool merge_with(const EditCommand& next) {
    (void)next;
    return false;
  }
  // True when the command, as apply() left `doc`, changes nothing (typed, then erased): after
  // a merge the history drops it.
  virtual bool changes_nothing(const Document& doc) const {
    (void)doc;
    return false;
  }
};

using EditResult = Result<std::unique_ptr<EditCommand>>;

// A canvas position; whole numbers are stored as JSON integers ("x": 40).
struct LayoutPos {
  double x = 0, y = 0;
};

// A node of a catalogue type, appended to doc.nodes. `params` are checked and completed
// with defaults as the loader does (complete_params); a renamed type id is taken under its
// new name. Refused: an invalid or duplicate id, an unknown type, a bad parameter.
EditResult make_add_node(const Document& doc, const std::string& id, const std::string& type,
                         const nlohmann::json& params = nlohmann::json::object(),
                         std::optional<LayoutPos> pos = std::nullopt,
                         const NodeCatalogue& catalogue = builtin_catalogue());

// Removes the node, every link to or from it and its layout entry.
EditResult make_remove_node(const Document& doc, const std::string& id);

// A link from an output "node:port" to an input "node:port". Refused: an unknown node or
// port, an output as the target (or an input as the source), ports of different kinds, an
// input that is already linked, a link that would close a cycle.
EditResult make_connect(const Document& doc, const std::string& from, const std::string& to,
                        const NodeCatalogue& catalogue = builtin_catalogue());

// Removes the link from `from` to `to` ("node:port" each).
EditResult make_disconnect(const Document& doc, const std::string& from, const std::string& to);

// Merges `patch` into the node's params as a JSON merge patch (RFC 7386: a null value
// resets the parameter to its default), then checks and completes them as the loader does.
EditResult make_set_params(const Document& doc, const std::string& id, const nlohmann::json& patch,
                           const NodeCatalogue& catalogue = builtin_catalogue());

// Where the node runs when the project trains on a GPU: "" the project's device, "cpu" the
// host (NodeDoc::device).
EditResult make_set_node_device(const Document& doc, const std::string& id,
                                const std::string& device);

// Renames a node; its links and layout entry follow.
EditResult make_rename_node(const Document& doc, const std::string& id, const std::string& new_id);

// Positions that read left to right: a node's column is its longest path from a source,
// rows follow file order within a column (Auto-layout in the editor, the ONNX import).
std::map<std::string, LayoutPos> layered_layout(const Document& doc);

// Sets the node's canvas position (other keys of its layout entry are kept).
EditResult make_move_node(const Document& doc, const std::string& id, LayoutPos pos);

// Merges `patch` into the "training" / "dataset" section as saved (a JSON merge patch)
// and reads the result back with the loader's parser, so the same rules and messages
// apply: make_set_training(doc, {{"optimizer", {{"lr", 0.1}}}}).
// Comment frames: titled rectangles the editor draws behind nodes to group and explain
// them. They live in the layout (the editor's part of the file) under kFramesKey, a key no
// node id can take, as [{"title": "Encoder", "x": 0, "y": 0, "w": 400, "h": 240}, ...].
inline constexpr const char* kFramesKey = "#frames";
struct CommentFrame {
  std::string title;
  double x = 0, y = 0, w = 0, h = 0;
};
std::vector<CommentFrame> comment_frames(const Document& doc);  // malformed entries skipped
// Replaces the frames (adding, moving, resizing, retitling or deleting one is a new list);
// refused when a frame has no size or a title over 500 characters.
EditResult make_set_frames(const Document& doc, const std::vector<CommentFrame>& frames,
                           std::string text);

EditResult make_set_training(const Document& doc, const nlohmann::json& patch);
EditResult make_set_dataset(const Document& doc, const nlohmann::json& patch);

// When a pushed command joins the step before it (UndoStack, and the editor's QUndoStack):
// both have the same non-empty merge_key(), that step is the last one applied (nothing undone
// or redone since, and it is not the saved state), no end_merge() came between them, and the
// push comes less than kMergeIdle after the one before it. So typing into a cell is one undo
// step until the person pauses for a second, another edit is made, or (in the editor) the
// keyboard focus moves. A step that comes to change nothing is dropped.
inline constexpr std::chrono::milliseconds kMergeIdle{1000};

// A linear history of applied commands, like QUndoStack: index() commands are applied,
// the ones after it can be redone. Pushing drops the redo tail.
class UndoStack {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Applies the command; on success records it (dropping the redo tail), on failure
  // returns the command's error and changes nothing.
  Result<void> push(std::unique_ptr<EditCommand> command, Document& doc);
  // The same straight from a factory: stack.push(make_connect(doc, a, b), doc).
  Result<void> push(EditResult command, Document& doc);

  // False when there is nothing to undo/redo, or when a redo no longer applies (the
  // document was changed behind the stack's back).
  bool undo(Document& doc);
  bool redo(Document& doc);
  bool can_undo() const { return index_ > 0; }
  bool can_redo() const { return index_ < commands_.size(); }
  std::string undo_text() const;  // "" when there is nothing to undo
  std::string redo_text() const;
  size_t size() const { return commands_.size(); }
  size_t index() const { return index_; }
  const EditCommand& command(size_t i) const;
  // Forgets every command (after loading another document, say); the state is clean.
  void clear();

  // The next push starts a step of its own, whatever its merge key (see kMergeIdle).
  void end_merge() { merge_open_ = false; }
  // The clock kMergeIdle is measured on (tests set their own); steady_clock by default.
  void set_clock(Clock clock) { clock_ = std::move(clock); }

  // The clean state marks the document as saved: is_clean() is true while the stack is at
  // the index of the last set_clean(). A clean state in a dropped redo tail is lost.
  void set_clean();
  bool is_clean() const { return clean_ == index_; }

  // Counts every change to the document made through the stack (push, undo, redo), so a
  // view can tell whether it is stale; the listener is called after each one.
  uint64_t revision() const { return revision_; }
  void set_on_change(std::function<void()> listener) { on_change_ = std::move(listener); }

 private:
  void changed();

  std::vector<std::unique_ptr<EditCommand>> commands_;
  size_t index_ = 0;
  std::optional<size_t> clean_ = 0;
  uint64_t revision_ = 0;
  std::function<void()> on_change_;
  bool merge_open_ = false;  // the last push may be merged into
  std::chrono::steady_clock::time_point last_push_{};
  Clock clock_;
};

// A document together with its edit history, as something that edits it sees it: a
// document with its UndoStack (OwnedHistory), or the editor's open project behind a
// QUndoStack. Lua's mls.project edits through this, so a script's edits of the project
// open in the editor land on the editor's undo stack.
class DocumentHistory {
 public:
  virtual ~DocumentHistory() = default;
  virtual const Document& doc() const = 0;
  // Applies and records the command; on failure returns its error and changes nothing.
  virtual Result<void> push(EditResult command) = 0;
  virtual bool undo() = 0;
  virtual bool redo() = 0;
  // The commands' texts, and how many of them are applied.
  virtual std::vector<std::string> history() const = 0;
  virtual size_t history_index() const = 0;
  // The document was saved as it is now.
  virtual void mark_saved() = 0;
  // The edit in progress ended: the next push starts its own undo step (see kMergeIdle).
  virtual void end_merge() {}
};

// A document that owns its history: what `mls.project.open` gives a script.
class OwnedHistory final : public DocumentHistory {
 public:
  // No default argument: GCC 12 takes the temporary Document's strings for uninitialised.
  OwnedHistory() = default;
  explicit OwnedHistory(Document doc) : doc_(std::move(doc)) {}
  const Document& doc() const override { return doc_; }
  Result<void> push(EditResult command) override { return stack_.push(std::move(command), doc_); }
  bool undo() override { return stack_.undo(doc_); }
  bool redo() override { return stack_.redo(doc_); }
  std::vector<std::string> history() const override;
  size_t history_index() const override { return stack_.index(); }
  void mark_saved() override { stack_.set_clean(); }
  void end_merge() override { stack_.end_merge(); }
  const UndoStack& stack() const { return stack_; }
  UndoStack& stack() { return stack_; }

 private:
  Document doc_;
  UndoStack stack_;
};

}  // namespace mls::nodes
