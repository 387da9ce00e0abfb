// The parts of the `mls` module, each opened into the module table on the top of the stack
// by lua_host.cpp's opener (a C closure whose upvalues 1 and 2 are the Runtime and the
// tensor metatable; see bindings.h).
#pragma once

#include <lua.hpp>

#include <string>

#include "engine/core/tensor.h"
#include "nodes/document.h"

namespace mls::lua {

void open_tensor_lib(lua_State* L);    // tensors, arithmetic, autograd (tensor_lib.cpp)
void open_autograd_lib(lua_State* L);  // requires_grad, backward, no_grad (autograd_lib.cpp)
void open_nn_lib(lua_State* L);        // mls.F: layers as functions, parameters (nn_lib.cpp)
void open_attention_lib(lua_State* L);  // mls.F's attention (attention_lib.cpp; after nn)
void open_words_lib(lua_State* L);      // mls.sample_words (words_lib.cpp)
void open_graph_lib(lua_State* L);     // mls.graph, mls.jit, mls.grad (graph_lib.cpp)
void open_train_lib(lua_State* L);     // mls.data, mls.optim, mls.train, mls.log (train_lib.cpp)
void open_project_lib(lua_State* L);   // mls.project (project_lib.cpp)
void open_onnx_lib(lua_State* L);      // mls.onnx.export (onnx_lib.cpp)
void open_plot_lib(lua_State* L);      // mls.plot (notebook/plot_lib.cpp)
void open_ui_lib(lua_State* L);        // mls.ui widgets (notebook/ui_lib.cpp)
void open_autodiff_lib(lua_State* L);  // mls.autodiff views (notebook/autodiff_lib.cpp)
void open_teach_lib(lua_State* L);     // mls.teach figures (notebook/teach_lib.cpp)

// The document behind an mls.project handle at `idx` (and its file, "" when it has none),
// or nullptr when the value is not an open project (project_lib.cpp).
const nodes::Document* project_document(lua_State* L, int idx, std::string* path);

// PyTorch-like text of a tensor (tensor_print.cpp): "tensor([[1.0000, 2.0000], ...])", summarised
// past 1000 elements.
std::string tensor_repr(const Tensor& t, bool requires_grad);

// The one number format tensor_repr gives every element of a tensor of `dtype` holding
// `values` (its to_f64()): "0.5000", "1.0000e-05" (when the magnitudes call for it), "3",
// "true". The notebook's tensor tables use it, so a table's cells read as the print does.
struct ElementFormat {
  DType dtype = DType::F32;
  bool ints = false, sci = false;
  std::string operator()(double x) const;
};
ElementFormat element_format(DType dtype, const std::vector<double>& values);

}  // namespace mls::lua
