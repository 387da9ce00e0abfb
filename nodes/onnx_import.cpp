#include "nodes/onnx_import.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "engine/onnx/onnx_windows.h"
#include "nodes/catalogue.h"
#include "nodes/edit.h"
#include "nodes/json_fields.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;
using onnx::Node;

// [SECTION] state of one import

struct Importer {
  Importer(const onnx::Model& model, const std::string& name) : m(model), source(name) {}
  const onnx::Model& m;
  const std::string& source;
  ImportedModel out;
  std::map<std::string, std::pair<std::string, std::string>> port_of;  // ONNX value -> (node, port)
  std::set<std::string> used_ids;
  std::set<const Node*> consumed;  // folded into an earlier node (the Add after a MatMul)
  std::vector<std::string> unsupported;
  std::string problem;  // why the current node cannot be mapped

  std::string make_id(const std::string& hint) {
    std::string id;
    for (char ch : hint)
      id += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')
                ? ch
                : '_';
    if (id.empty() || !(std::isalpha(static_cast<unsigned char>(id[0])) || id[0] == '_'))
      id = "n_" + id;
    std::string base = id;
    for (int k = 2; used_ids.count(id); ++k) id = base + "_" + std::to_string(k);
    used_ids.insert(id);
    return id;
  }

  // Adds a node linked from the ONNX values `inputs` to the catalogue type's ports.
  std::string add(const std::string& type, const std::string& hint, json params,
                  const std::vector<std::string>& inputs, const std::string& output_value) {
    const NodeTypeDef* t = builtin_catalogue().find(type);
    std::string id = make_id(hint);
    out.doc.nodes.push_back({id, type, 1, std::move(params)});
    for (size_t i = 0; i < inputs.size() && i < t->inputs.size(); ++i) {
      const auto& [from, port] = port_of.at(inputs[i]);
      out.doc.links.push_back({from, port, id, t->inputs[i].name});
    }
    port_of[output_value] = {id, t->outputs.at(0).name};
    return id;
  }

  void weight(const std::string& id, const std::string& name, CheckpointTensor t) {
    t.name = id + "." + name;
    t.dtype = DType::F32;
    out.weights.push_back(std::move(t));
  }

  const CheckpointTensor* init(const Node& n, size_t i) const {
    return i < n.inputs.size() ? m.initializer(n.inputs[i]) : nullptr;
  }
  bool defined(const std::string& v) const { return port_of.count(v) > 0; }
  std::string hint(const Node& n) const { return n.outputs.at(0).empty() ? n.name : n.outputs[0]; }
};

CheckpointTensor transposed(const CheckpointTensor& t) {
  CheckpointTensor r = t;
  const int64_t rows = t.shape[0], cols = t.shape[1];
  r.shape = {cols, rows};
  const auto* src = reinterpret_cast<const float*>(t.bytes.data());
  auto* dst = reinterpret_cast<float*>(r.bytes.data());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  return r;
}

bool is_f32(const CheckpointTensor* t) {
  return t && t->dtype == DType::F32;
}

// One value for both axes (the node types hold one): the value, or the reason in `why`.
bool square(const Pair2& v, const char* name, int64_t& out, std::string& why) {
  if (v[0] != v[1]) {
    why = std::string(name) + " must be equal for height and width";
    return false;
  }
  out = v[0];
  return true;
}

bool map_conv(Importer& im, const Node& n) {
  const CheckpointTensor* w = im.init(n, 1);
  if (!is_f32(w) || w->shape.size() != 4)
    return im.problem = "the weight must be a 4-D float initializer", false;
  if (w->shape[2] != w->shape[3]) return im.problem = "only square kernels are supported", false;
  auto window = onnx::conv_window(n);  // ONNX's window attributes, read as the engine reads them
  if (!window) return im.problem = window.error().message, false;
  int64_t s = 1, p = 0, d = 1;
  if (!square(window->stride, "strides", s, im.problem) ||
      !square(window->padding, "pads", p, im.problem) ||
      !square(window->dilation, "dilations", d, im.problem))
    return false;
  const bool transposed_conv = n.op_type == "ConvTranspose";
  const int64_t groups = window->groups;
  const CheckpointTensor* b = n.inputs.size() > 2 && !n.inputs[2].empty() ? im.init(n, 2) : nullptr;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !is_f32(b))
    return im.problem = "the bias must be a float initializer", false;
  json params{{"out_channels", transposed_conv ? w->shape[1] * groups : w->shape[0]},
              {"kernel_size", w->shape[2]},
              {"stride", s},
              {"padding", p},
              {"dilation", d},
              {"groups", groups},
              {"bias", b != nullptr}};
  if (transposed_conv) {
    int64_t op = 0;
    if (!square(window->output_padding, "output_padding", op, im.problem)) return false;
    params["output_padding"] = op;
  }
  std::string id = im.add(transposed_conv ? "mls.conv_transpose2d" : "mls.conv2d", im.hint(n),
                          params, {n.inputs[0]}, n.outputs[0]);
  im.weight(id, "weight", *w);
  if (b) im.weight(id, "bias", *b);
  return true;
}

// Gemm, or MatMul by a 2-D initializer with an optional Add of a 1-D one after it.
bool map_linear(Importer& im, const Node& n) {
  const CheckpointTensor* w = im.init(n, 1);
  if (!is_f32(w) || w->shape.size() != 2)
    return im.problem = "the weight must be a 2-D float initializer", false;
  CheckpointTensor weight = *w;
  const CheckpointTensor* b = nullptr;
  std::string output = n.outputs[0], hint = im.hint(n);
  if (n.op_type == "Gemm") {
    if (n.float_or("alpha", 1.0) != 1.0 || n.float_or("beta", 1.0) != 1.0 ||
        n.int_or("transA", 0) != 0)
      return im.problem = "only alpha = beta = 1 and transA = 0 are supported", false;
    if (n.int_or("transB", 0) != 0) weight = transposed(*w);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      b = im.init(n, 2);
      if (!is_f32(b) || numel(b->shape) != weight.shape[1])
        return im.problem = "the bias must be a float initializer of the output size", false;
    }
  } else {  // MatMul: fold a following Add of a bias vector into the layer
    auto users = im.m.consumers(output);
    if (users.size() == 1 && users[0]->op_type == "Add") {
      const Node& add = *users[0];
      const size_t other = add.inputs[0] == output ? 1 : 0;
      const CheckpointTensor* bias = im.m.initializer(add.inputs[other]);
      if (is_f32(bias) && numel(bias->shape) == weight.shape[1]) {
        b = bias;
        im.consumed.insert(&add);
        output = add.outputs[0];
        hint = im.hint(add);
      }
    }
  }
  std::string id =
      im.add("mls.linear", hint, {{"out_features", weight.shape[1]}, {"bias", b != nullptr}},
             {n.inputs[0]}, output);
  im.weight(id, "weight", weight);
  if (b) {
    CheckpointTensor bias = *b;
    bias.shape = {weight.shape[1]};
    im.weight(id, "bias", bias);
  }
  return true;
}

bool map_pool(Importer& im, const Node& n) {
  auto window = onnx::pool_window(n);  // ONNX's window attributes, read as the engine reads them
  if (!window) return im.problem = window.error().message, false;
  if (window->kernel[0] != window->kernel[1])
    return im.problem = "only square 2-D windows are supported", false;
  int64_t s = 0, p = 0;
  if (!square(window->stride, "strides", s, im.problem) ||
      !square(window->padding, "pads", p, im.problem))
    return false;
  if (n.outputs.size() > 1) return im.problem = "the Indices output is not supported", false;
  const bool avg = n.op_type == "AveragePool";
  if (avg && p > 0 && !window->count_include_pad)
    return im.problem = "padded average pooling must count the padding (count_include_pad = 1)",
           false;
  im.add(avg ? "mls.avg_pool2d" : "mls.max_pool2d", im.hint(n),
         {{"kernel_size", window->kernel[0]}, {"stride", s}, {"padding", p}}, {n.inputs[0]},
         n.outputs[0]);
  return true;
}

bool map_batch_norm(Importer& im, const Node& n) {
  if (n.outputs.size() > 1)
    return im.problem = "training-mode BatchNormalization is not supported", false;
  std::vector<const CheckpointTensor*> t;
  for (size_t i = 1; i < 5; ++i) {
    t.push_back(im.init(n, i));
    if (!is_f32(t.back()))
      return im.problem = "scale, bias, mean and var must be float initializers", false;
  }
  std::string id = im.add("mls.batch_norm", im.hint(n), {{"eps", n.float_or("epsilon", 1e-5)}},
                          {n.inputs[0]}, n.outputs[0]);
  const char* names[] = {"weight", "bias", "running_mean", "running_var"};
  for (size_t i = 0; i < 4; ++i) im.weight(id, names[i], *t[i]);
  return true;
}

bool map_simple(Importer& im, const Node& n, const std::string& type,
                json params = json::object()) {
  std::vector<std::string> ins;
  for (const std::string& i : n.inputs)
    if (!i.empty()) ins.push_back(i);
  for (const std::string& i : ins)
    if (!im.defined(i))
      return im.problem = "input '" + i + "' is a constant; only computed inputs are supported",
             false;
  im.add(type, im.hint(n), std::move(params), ins, n.outputs[0]);
  return true;
}

bool map_node(Importer& im, const Node& n, int64_t rank) {
  const std::string& op = n.op_type;
  if (!n.domain.empty()) return im.problem = "custom domain '" + n.domain + "'", false;
  if (n.inputs.empty() || n.outputs.empty())
    return im.problem = "a node without inputs or outputs", false;
  // Input 0 is the data every mapped op reads: it must come from an imported node.
  if (!im.defined(n.inputs[0]) && !im.m.initializer(n.inputs[0]))
    return im.problem =
               "its input '" + n.inputs[0] + "' comes from a node that could not be imported",
           false;
  if (!im.defined(n.inputs[0])) return im.problem = "its data input is a constant", false;
  if (op == "Identity" || op == "Dropout") {
    if (!im.defined(n.inputs.at(0))) return im.problem = "a constant input", false;
    im.port_of[n.outputs[0]] = im.port_of.at(n.inputs[0]);
    return true;
  }
  if (op == "Conv" || op == "ConvTranspose") return map_conv(im, n);
  if (op == "Gemm" || op == "MatMul") return map_linear(im, n);
  if (op == "MaxPool" || op == "AveragePool") return map_pool(im, n);
  if (op == "BatchNormalization") return map_batch_norm(im, n);
  if (op == "Relu") return map_simple(im, n, "mls.relu");
  if (op == "Tanh") return map_simple(im, n, "mls.tanh");
  if (op == "Sigmoid") return map_simple(im, n, "mls.sigmoid");
  if (op == "LeakyRelu")
    return map_simple(im, n, "mls.leaky_relu", {{"negative_slope", n.float_or("alpha", 0.01)}});
  if (op == "Elu") return map_simple(im, n, "mls.elu", {{"alpha", n.float_or("alpha", 1.0)}});
  if (op == "Softplus") return map_simple(im, n, "mls.softplus");
  if (op == "Softmax" || op == "LogSoftmax") {
    const int64_t axis = n.int_or("axis", -1);
    if (axis != -1 && axis != rank - 1)
      return im.problem = "only the last axis is supported", false;
    return map_simple(im, n, op == "Softmax" ? "mls.softmax" : "mls.log_softmax");
  }
  if (op == "Flatten") {
    if (n.int_or("axis", 1) != 1)
      return im.problem = "only axis 1 (keep the batch) is supported", false;
    return map_simple(im, n, "mls.flatten");
  }
  if (op == "Reshape") {
    const CheckpointTensor* s = im.init(n, 1);
    if (!s) return im.problem = "the shape must be an initializer", false;
    std::vector<double> dims = onnx::values_of(*s);
    if (dims.size() < 2 || (dims[0] != 0 && dims[0] != -1))
      return im.problem = "the shape must keep the batch dim (0 or -1 first)", false;
    std::string text;
    for (size_t i = 1; i < dims.size(); ++i)
      text += (i > 1 ? "," : "") + std::to_string(static_cast<int64_t>(dims[i]));
    if (!im.defined(n.inputs[0])) return im.problem = "a constant input", false;
    im.add("mls.reshape", im.hint(n), {{"shape", text}}, {n.inputs[0]}, n.outputs[0]);
    return true;
  }
  if (op == "GlobalAveragePool") {
    // mlstudio's pool flattens to [N, C]: take the Flatten after it along when there is one.
    auto users = im.m.consumers(n.outputs[0]);
    std::string out = n.outputs[0];
    if (users.size() == 1 && users[0]->op_type == "Flatten" && users[0]->int_or("axis", 1) == 1) {
      im.consumed.insert(users[0]);
      out = users[0]->outputs[0];
    } else {
      return im.problem = "only GlobalAveragePool followed by Flatten is supported", false;
    }
    if (!im.defined(n.inputs[0])) return im.problem = "a constant input", false;
    im.add("mls.global_avg_pool", im.hint(n), json::object(), {n.inputs[0]}, out);
    return true;
  }
  if (op == "LayerNormalization") {
    const CheckpointTensor* g = im.init(n, 1);
    const CheckpointTensor* b = im.init(n, 2);
    if (n.int_or("axis", -1) != -1 && n.int_or("axis", -1) != rank - 1)
      return im.problem = "only the last axis is supported", false;
    if (!is_f32(g) || !is_f32(b))
      return im.problem = "scale and bias must be float initializers", false;
    std::string id = im.add("mls.layer_norm", im.hint(n), {{"eps", n.float_or("epsilon", 1e-5)}},
                            {n.inputs[0]}, n.outputs[0]);
    im.weight(id, "weight", *g);
    im.weight(id, "bias", *b);
    return true;
  }
  if (op == "Add") return map_simple(im, n, "mls.add");
  if (op == "Concat") {
    if (n.inputs.size() != 2) return im.problem = "only two inputs are supported", false;
    return map_simple(im, n, "mls.concat", {{"axis", n.int_or("axis", 1)}});
  }
  return im.problem = "no mlstudio node computes " + op, false;
}

}  // namespace

Result<ImportedModel> import_onnx(const onnx::Model& m, const std::string& source) {
  if (m.inputs.size() != 1)
    return make_error(source + ": the model has " + std::to_string(m.inputs.size()) +
                      " inputs; mlstudio imports models with one");
  if (m.outputs.empty()) return make_error(source + ": the model has no output");
  Importer im(m, source);
  im.out.doc.name = m.graph_name.empty() ? "imported model" : m.graph_name;
  im.out.doc.description = "Imported from " + source +
                           (m.producer_name.empty() ? "" : " (written by " + m.producer_name + ")");

  // An mlstudio export records the project's training settings; they are checked like the
  // project's own "training" section, so the imported project trains as the original did.
  if (std::string t = m.metadata_value("mlstudio.training"); !t.empty()) {
    const std::string where = source + ": metadata 'mlstudio.training'";
    json settings = json::parse(t, nullptr, false);
    if (settings.is_discarded()) return make_error(where + ": not valid JSON");
    if (auto r =
            parse_training(FieldReader(where), json{{"training", settings}}, im.out.doc.training);
        !r)
      return r.error();
  }

  // An mlstudio export starts with its input preprocessing; the project's dataset does that
  // again, so the model proper starts at the value the metadata names.
  const onnx::ValueInfo& input = m.inputs[0];
  std::string start = m.metadata_value("mlstudio.model_input");
  if (start.empty()) start = input.name;
  bool started = start == input.name;
  for (size_t d = 1; d < input.dims.size(); ++d) {
    if (input.dims[d].value < 1)
      return make_error(source + ": input '" + input.name + "' dim " + std::to_string(d) +
                        " is not a fixed size");
    im.out.sample_shape.push_back(input.dims[d].value);
  }
  const std::string input_id = im.make_id(input.name);
  im.out.doc.nodes.push_back({input_id, "mls.input", 1, json::object()});
  im.port_of[start] = {input_id, "out"};

  std::string output = m.outputs[0].name;
  // A final Softmax turns logits into probabilities, which a cross-entropy loss must not
  // get: the imported model stops before it (the same argmax).
  if (const Node* last = m.producer(output);
      last && last->op_type == "Softmax" && m.consumers(output).empty()) {
    im.out.notes.push_back("the final Softmax ('" + last->name +
                           "') was left out: the CrossEntropy loss takes logits");
    im.consumed.insert(last);
    output = last->inputs.at(0);
  }
  im.out.output_value = output;
  const int64_t rank = static_cast<int64_t>(input.dims.size());
  for (const Node& n : m.nodes) {
    if (!started) {
      started = std::find(n.outputs.begin(), n.outputs.end(), start) != n.outputs.end();
      continue;
    }
    if (im.consumed.count(&n)) continue;
    im.problem.clear();
    // The rank given to Softmax/LayerNorm is a hint only; the shape check verifies later.
    if (!map_node(im, n, rank))
      im.unsupported.push_back("node '" + (n.name.empty() ? n.outputs.at(0) : n.name) + "' (" +
                               n.op_type + "): " + im.problem);
  }
  if (!im.unsupported.empty()) {
    std::string list;
    for (const std::string& s : im.unsupported) list += "\n  " + s;
    return make_error(source + ": cannot import " + std::to_string(im.unsupported.size()) + " of " +
                      std::to_string(m.nodes.size()) + " nodes:" + list);
  }
  if (!im.port_of.count(output))
    return make_error(source + ": output '" + output + "' is computed by no imported node");

  // A loss on the output, so the model trains: cross-entropy for class scores, MSE for values.
  const bool regression = m.outputs[0].name == "prediction";
  const std::string labels = im.make_id(regression ? "targets" : "label");
  im.out.doc.nodes.push_back({labels, "mls.labels", 1, json::object()});
  const std::string loss = im.make_id("loss");
  im.out.doc.nodes.push_back(
      {loss, regression ? "mls.mse_loss" : "mls.cross_entropy", 1, json::object()});
  const auto& [from, port] = im.port_of.at(output);
  im.out.doc.links.push_back({from, port, loss, regression ? "prediction" : "logits"});
  im.out.doc.links.push_back({labels, "out", loss, regression ? "targets" : "labels"});

  for (NodeDoc& n : im.out.doc.nodes) {
    auto full = complete_params(*builtin_catalogue().find(n.type), n.params);
    if (!full)
      return make_error(source + ": node '" + n.id + "' (" + n.type + "): " + full.error().message);
    n.params = std::move(*full);
  }
  for (const auto& [id, pos] : layered_layout(im.out.doc))
    im.out.doc.layout[id] = {{"x", pos.x}, {"y", pos.y}};
  return std::move(im.out);
}

}  // namespace mls::nodes
