// Shared pieces for defining node types (nodes/types/*.cpp): type and parameter
// constructors and the shape helpers several families use. Internal to nodes/.
//
//   NodeTypeDef d = make_type("mls.relu", "ReLU", "Activations", "max(x, 0).",
//                             {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
//   d.infer = same_shape;
//   d.lower = [](LowerContext& c) -> Result<Refs> { return Refs{relu(c.g(), c.inputs[0])}; };
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/ops/conv.h"
#include "engine/ops/layers.h"
#include "nodes/catalogue.h"
#include "nodes/lower.h"

namespace mls::nodes {

using nlohmann::json;

NodeTypeDef make_type(std::string id, std::string display_name, std::string category,
                      std::string doc, std::vector<PortDef> inputs, std::vector<PortDef> outputs,
                      NodeRole role = NodeRole::Layer);
// A parameter whose default is null is required.
ParamDef make_param(std::string name, ParamKind kind, json default_value, std::string doc);
// An integer in [min, 65536].
ParamDef int_param(std::string name, int64_t def, int64_t min, std::string doc);
// A float in [min, max] (or [min, max) with `max_exclusive`).
ParamDef float_param(std::string name, double def, double min, double max, std::string doc,
                     bool max_exclusive = false);
// The weight initialiser choice: kaiming_uniform (default), xavier_uniform, uniform_fan_in
// (PyTorch's default for nn.Linear and nn.Conv2d), normal, zeros.
ParamDef init_param(std::string doc);
// "frozen": the node's parameters are not trained (transfer learning, teaching).
ParamDef frozen_param();

Result<std::vector<Shape>> one(Shape s);
// A shape rule for elementwise nodes: the output has the input's shape.
Result<std::vector<Shape>> same_shape(const std::vector<Shape>& in, const json&,
                                      const InferContext&);

// [N,C,H,W] or an error that names the layer and what to do.
Result<void> expect_image(const Shape& s, const std::string& layer);
// A shape rule that asks the op: its output shapes from the op's own type inference (so the
// window arithmetic of convolution and pooling lives once, in the op), for inputs whose
// batch dim -1 stands for any batch. When the op refuses, `misfit` (what the user should
// read, naming the sizes) leads the message.
Result<std::vector<Shape>> op_shapes(std::string_view op, std::vector<ValueType> inputs,
                                     const Attrs& attrs, const std::string& misfit);

bool frozen(const json& params);

// A declared layer's parameters (engine/ops/layers.h), the node's "init" choice applied, as
// graph params "<node id>.<name>" in the declared order. Trainable ones train unless `train`
// is false (a frozen node).
LayerConfig layer_config(const json& params, int64_t in, int64_t out);
Result<std::vector<Ref>> layer_param_refs(LowerContext& c, std::string_view layer,
                                          const LayerConfig& cfg, bool train);

// The families, one file each.
void register_data_nodes(NodeCatalogue& catalogue);        // data_nodes.cpp
void register_dense_nodes(NodeCatalogue& catalogue);       // dense_nodes.cpp
void register_conv_nodes(NodeCatalogue& catalogue);        // conv_nodes.cpp
void register_activation_nodes(NodeCatalogue& catalogue);  // activation_nodes.cpp
void register_norm_nodes(NodeCatalogue& catalogue);        // norm_nodes.cpp
void register_loss_nodes(NodeCatalogue& catalogue);        // loss_nodes.cpp
void register_merge_nodes(NodeCatalogue& catalogue);       // merge_nodes.cpp
void register_sequence_nodes(NodeCatalogue& catalogue);    // sequence_nodes.cpp
void register_position_nodes(NodeCatalogue& catalogue);    // position_nodes.cpp

}  // namespace mls::nodes
