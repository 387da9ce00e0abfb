// The node catalogue: every node type a project may use, with its ports, parameters and
// shape rule. Types are data, so the palette, the inspector, the loader, shape checking
// and lowering all read the same definition.
//
//   const NodeCatalogue& cat = builtin_catalogue();
//   const NodeTypeDef* linear = cat.find("mls.linear");
//   nlohmann::json params = linear->default_params();   // {"bias":true,"init":...}
//   params["out_features"] = 10;
//   InferContext ctx{.sample_shape = {1, 28, 28}, .num_classes = 10};
//   Result<std::vector<Shape>> out = linear->infer({{-1, 784}}, params, ctx);  // {{-1, 10}}
//
// Type ids are stable ("mls.linear"); when one is renamed the old id stays in the rename
// map so that old files still load (the loader records a warning and saves the new id).
// Each type also carries its lowering to engine IR (nodes/lower.h), so a new type is one
// function in one file of nodes/types/.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/result.h"
#include "engine/core/shape.h"
#include "engine/ir/value.h"

namespace mls::nodes {

// What flows along a link. Kinds must match at both ends of a link: a label vector is not
// a tensor a layer can consume. Labels are class indices [N]; targets are real values
// [N, ...] (regression, or one-hot/multi-label targets for BCE).
enum class PortKind { Tensor, Labels };

struct PortDef {
  std::string name;
  PortKind kind = PortKind::Tensor;
};

enum class ParamKind { Int, Float, Bool, String, Enum };

struct ParamDef {
  std::string name;
  ParamKind kind = ParamKind::Int;
  nlohmann::json default_value;  // null when `required`
  bool required = false;
  std::optional<double> min;         // inclusive
  std::optional<double> max;         // see max_exclusive
  bool max_exclusive = false;        // [min, max) rather than [min, max]
  std::vector<std::string> choices;  // for ParamKind::Enum
  std::string doc;
  // False for options added after a type's first version: at their default they are left
  // out of saved files, so older projects round-trip unchanged.
  bool saved_when_default = true;
};

// How a node takes part in training, so that loaders and lowering need not compare ids.
enum class NodeRole {
  Layer,       // an ordinary computation
  DataInput,   // fed with a batch of samples
  DataLabels,  // fed with a batch of targets (class labels or values)
  Loss,        // the one loss of the graph; its "logits" input is the model output
};

// Facts about the run that shapes depend on but that are not in the graph.
struct InferContext {
  Shape sample_shape;       // one dataset sample, without the batch dim, e.g. {1, 28, 28}
  int64_t num_classes = 0;  // 0 when unknown or when the targets are values
  // One sample's target values ({1} for a scalar regression target); empty when the
  // targets are class labels.
  Shape target_shape;
  bool regression() const { return !target_shape.empty(); }
};

// Shapes are written with the batch dim first as -1. `params` have been checked and have
// their defaults filled in. An error message names the port or parameter at fault; the
// caller prefixes it with the node ("node 'fc1' (mls.linear): ").
using InferFn = std::function<Result<std::vector<Shape>>(
    const std::vector<Shape>& inputs, const nlohmann::json& params, const InferContext& ctx)>;

// Emits a node's IR; runs after `infer` accepted the shapes (nodes/lower.h).
struct LowerContext;
using LowerFn = std::function<Result<std::vector<Ref>>(LowerContext& ctx)>;

struct NodeTypeDef {
  std::string id;  // stable, e.g. "mls.linear"
  int version = 1;
  std::string display_name, category, doc;
  NodeRole role = NodeRole::Layer;
  std::vector<PortDef> inputs, outputs;  // every input must be linked
  std::vector<ParamDef> params;
  InferFn infer;
  LowerFn lower;  // empty: the type can be drawn but not trained yet

  const PortDef* find_input(std::string_view name) const;
  const PortDef* find_output(std::string_view name) const;
  // Index into inputs/outputs, or -1.
  int input_index(std::string_view name) const;
  int output_index(std::string_view name) const;
  const ParamDef* find_param(std::string_view name) const;
  // An object with every parameter that has a default.
  nlohmann::json default_params() const;
};

// Checks one parameter value. The message completes "node 'fc1' (…/out_features): ",
// e.g. "must be an integer >= 1".
Result<void> check_param_value(const ParamDef& def, const nlohmann::json& value);

// Checks a node's params object and returns it with defaults filled in and Float values
// stored as doubles. On failure `*bad_param` (when given) receives the parameter at fault,
// or "" when the problem is the object itself or a missing parameter; the message reads
// on its own after that path: "must be an integer >= 1",
// "missing required parameter 'out_features'", "unknown parameter 'foo' (…)".
Result<nlohmann::json> complete_params(const NodeTypeDef& def, const nlohmann::json& params,
                                       std::string* bad_param = nullptr);

// "[N,1,28,28]": the batch dim (-1) is printed as N.
std::string format_shape(const Shape& s);

class NodeCatalogue {
 public:
  // Registering the same id twice is a programmer error.
  void add(NodeTypeDef def);
  // Old files that name `old_id` load as `new_id`.
  void add_rename(std::string old_id, std::string new_id);

  const NodeTypeDef* find(std::string_view id) const;  // current ids only
  const std::vector<NodeTypeDef>& all() const { return types_; }
  // The current id for an id that was renamed (following chains), or nullopt.
  std::optional<std::string> renamed_to(std::string_view old_id) const;
  const std::map<std::string, std::string, std::less<>>& renames() const { return renames_; }

 private:
  std::vector<NodeTypeDef> types_;
  std::map<std::string, std::string, std::less<>> renames_;
};

// Adds the built-in types (mls.input, mls.linear, …) and their renames.
void register_builtin_nodes(NodeCatalogue& catalogue);

// A catalogue holding the built-in types, built on first use.
const NodeCatalogue& builtin_catalogue();

}  // namespace mls::nodes
