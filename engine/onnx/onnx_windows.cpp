#include "engine/onnx/onnx_windows.h"

namespace mls::onnx {

namespace {

struct Window {
  Pair2 stride, padding, dilation;
};

Result<Window> window(const Node& n) {
  if (n.string_or("auto_pad", "NOTSET") != "NOTSET")
    return make_error("auto_pad '" + n.string_or("auto_pad", "") +
                      "' is not supported (give explicit pads)");
  auto strides = n.ints_or("strides", {1, 1});
  auto pads = n.ints_or("pads", {0, 0, 0, 0});
  auto dil = n.ints_or("dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    return make_error("only 2-D windows are supported");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    return make_error("asymmetric pads are not supported");
  return Window{{strides[0], strides[1]}, {pads[0], pads[1]}, {dil[0], dil[1]}};
}

}  // namespace

Result<Conv2dParams> conv_window(const Node& n) {
  auto w = window(n);
  if (!w) return w.error();
  Conv2dParams p;
  p.stride = w->stride;
  p.padding = w->padding;
  p.dilation = w->dilation;
  p.groups = n.int_or("group", 1);
  if (n.op_type == "ConvTranspose") {
    auto op = n.ints_or("output_padding", {0, 0});
    if (op.size() != 2) return make_error("output_padding must have two entries");
    p.output_padding = {op[0], op[1]};
  }
  return p;
}

Result<Pool2dParams> pool_window(const Node& n) {
  auto w = window(n);
  if (!w) return w.error();
  if (w->dilation != Pair2{1, 1}) return make_error("dilated pooling is not supported");
  if (n.int_or("ceil_mode", 0) != 0) return make_error("ceil_mode 1 is not supported");
  auto k = n.ints_or("kernel_shape", {});
  if (k.size() != 2) return make_error("kernel_shape must have two entries");
  Pool2dParams p;
  p.kernel = {k[0], k[1]};
  p.stride = w->stride;
  p.padding = w->padding;
  p.count_include_pad = n.int_or("count_include_pad", 0) != 0;  // ONNX's default is 0
  return p;
}

}  // namespace mls::onnx
