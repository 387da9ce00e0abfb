// Graph: the static IR, in SSA form. Values are defined once (graph inputs, parameters,
// constants, node outputs); nodes are kept in a topological order by construction.
//
//   Graph g("mlp");
//   Ref x = g.add_input("x", {DType::F32, {128, 784}});
//   Ref w = g.add_param("fc1.weight", {DType::F32, {784, 256}}, "kaiming_uniform", 784);
//   Result<Refs> y = g.add_node("matmul", {x, w}, {});      // checked: shapes must agree
//   g.add_output(y->at(0));
//   assert(g.verify().ok());
//   std::cout << g.to_text();
//      graph mlp(%0: f32[128,784]) params(%1: f32[784,256]) {
//        %2: f32[128,256] = matmul(%0, %1)
//        return %2
//      }
#pragma once

#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/ir/emitter.h"

namespace mls {

enum class ValueKind : uint8_t { Input, Param, Const, Node };

struct ParamInit {
  std::string scheme;  // "kaiming_uniform", "xavier_uniform", "zeros", "ones"
  int64_t fan_in = 0, fan_out = 0;
};

struct Value {
  ValueType type;
  ValueKind kind = ValueKind::Node;
  int32_t node = -1;  // producer, for ValueKind::Node
  int32_t output_index = 0;
  std::string name;  // inputs and params; node outputs may be unnamed
  ParamInit init;    // params
  bool trainable = true;  // params: false for frozen weights and running statistics
  Tensor constant;   // consts
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  Refs inputs;
  Refs outputs;
  std::string label;   // where it came from: a document node id, "fc1", or "fc1.grad"
  bool backward = false;
};

class Graph final : public Emitter {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  Ref add_input(const std::string& name, const ValueType& type);
  // A parameter that is not trainable (frozen, or state such as running statistics) gets
  // no gradient and no optimizer step, but is saved and restored like the others.
  Ref add_param(const std::string& name, const ValueType& type, ParamInit init = {}, bool trainable = true);
  Ref add_constant(const std::string& name, Tensor value);
  // Type-checks against the op's inference; the message names the op and the label.
  Result<Refs> add_node(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs);
  Result<Refs> add_node(std::string_view op, std::initializer_list<Ref> inputs, const Attrs& attrs) {
    return add_node(op, std::span<const Ref>(inputs.begin(), inputs.size()), attrs);
  }
  void add_output(Ref r) { outputs_.push_back(r); }
  void set_outputs(Refs outs) { outputs_ = std::move(outs); }

  // Emitter
  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override;
  ValueType type_of(Ref r) const override;

  // Labels given to nodes added from now on (the lowering sets the document node id).
  void set_label(std::string label) { label_ = std::move(label); }
  void set_scope(const std::string& label) override { label_ = label; }
  const std::string& label() const { return label_; }
  void set_backward_mode(bool on) { backward_mode_ = on; }

  const std::string& name() const { return name_; }
  const std::vector<Value>& values() const { return values_; }
  const Value& value(Ref r) const { return values_.at(static_cast<size_t>(r.id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Refs& inputs() const { return inputs_; }
  const Refs& params() const { return params_; }
  const Refs& outputs() const { return outputs_; }
  Ref find_value(const std::string& name) const;  // invalid if absent

  // Checks SSA form and types: every use after its definition, types as inferred.
  Result<void> verify() const;
  std::string to_text() const;
  std::string value_name(Ref r) const;  // "%7" or "%x"
  // The value whose storage `r` reads: through views (reshape: output 0 of an OpDef::view
  // op) back to the value they view; `r` itself when it is no view.
  Ref viewed_value(Ref r) const;

 private:
  Ref new_value(Value v);
  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  Refs inputs_, params_, outputs_;
  std::string label_;
  bool backward_mode_ = false;
};

}  // namespace mls
