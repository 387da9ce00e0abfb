// Image layers: Conv2d, ConvTranspose2d and the pooling family.
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

Pool2dParams pool_params(const json& p) {
  int64_t k = p.at("kernel_size").get<int64_t>(), s = p.at("stride").get<int64_t>();
  int64_t pad = p.at("padding").get<int64_t>();
  Pool2dParams q;
  q.kernel = {k, k};
  q.stride = {s == 0 ? k : s, s == 0 ? k : s};
  q.padding = {pad, pad};
  return q;
}

// The node's parameters as the op's (square kernels: one value for both axes).
Conv2dParams conv_params(const json& p, bool transpose) {
  auto pair = [&](const char* name) {
    int64_t v = p.at(name).get<int64_t>();
    return Pair2{v, v};
  };
  Conv2dParams q;
  q.stride = pair("stride");
  q.padding = pair("padding");
  q.dilation = pair("dilation");
  q.groups = p.at("groups").get<int64_t>();
  if (transpose) q.output_padding = pair("output_padding");
  return q;
}

// The layer declaration's config (engine/ops/layers.h) for `cin` input channels.
LayerConfig conv_config(const json& p, int64_t cin) {
  LayerConfig c = layer_config(p, cin, p.at("out_channels").get<int64_t>());
  c.kernel = p.at("kernel_size").get<int64_t>();
  c.groups = p.at("groups").get<int64_t>();
  return c;
}

// The kernel's shape, as the layer declares it: [O, C/groups, k, k], [C, O/groups, k, k]
// transposed.
Shape kernel_shape(const json& p, int64_t cin, bool transpose) {
  auto ps = layer_params(transpose ? "conv_transpose2d" : "conv2d", conv_config(p, cin));
  return ps ? ps->at(0).shape : Shape{};
}

Result<Refs> lower_conv(LowerContext& c, bool transpose) {
  const json& p = c.params;
  const int64_t o = p.at("out_channels").get<int64_t>();
  auto ps = layer_param_refs(c, transpose ? "conv_transpose2d" : "conv2d",
                             conv_config(p, c.shape(0)[1]), !frozen(p));
  if (!ps) return ps.error();
  const Conv2dParams q = conv_params(p, transpose);
  Ref y = transpose ? conv_transpose2d(c.g(), c.inputs[0], ps->at(0), q)
                    : conv2d(c.g(), c.inputs[0], ps->at(0), q);
  if (ps->size() > 1) y = add(c.g(), y, reshape(c.g(), ps->at(1), {o, 1, 1}));
  return Refs{y};
}

Result<Refs> lower_conv2d(LowerContext& c) {
  return lower_conv(c, false);
}

Result<Refs> lower_conv_transpose2d(LowerContext& c) {
  return lower_conv(c, true);
}

Result<Refs> lower_pool(LowerContext& c, bool max) {
  Pool2dParams q = pool_params(c.params);
  return Refs{max ? max_pool2d(c.g(), c.inputs[0], q) : avg_pool2d(c.g(), c.inputs[0], q)};
}
Result<Refs> lower_max_pool(LowerContext& c) {
  return lower_pool(c, true);
}
Result<Refs> lower_avg_pool(LowerContext& c) {
  return lower_pool(c, false);
}

NodeTypeDef conv2d_node() {
  NodeTypeDef d = make_type("mls.conv2d", "Conv2d", "Layers",
                            "2-D convolution (cross-correlation, as PyTorch): [N,C,H,W] -> "
                            "[N,out_channels,H',W'], with a learned bias per output channel.",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef out = make_param("out_channels", ParamKind::Int, nullptr, "Number of output channels.");
  out.min = 1;
  out.max = 1 << 16;
  d.params = {out,
              int_param("kernel_size", 3, 1, "Kernel height and width."),
              int_param("stride", 1, 1, "Step between windows."),
              int_param("padding", 0, 0, "Zeros added on each side."),
              int_param("dilation", 1, 1, "Spacing between kernel taps."),
              int_param("groups", 1, 1, "Channel groups (in and out channels must divide by it)."),
              make_param("bias", ParamKind::Bool, true, "Learn an additive bias per channel."),
              init_param("How the kernel is initialised."),
              frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_image(s, "Conv2d"); !r) return r.error();
    int64_t o = p.at("out_channels").get<int64_t>(), k = p.at("kernel_size").get<int64_t>();
    int64_t st = p.at("stride").get<int64_t>(), pad = p.at("padding").get<int64_t>();
    int64_t dil = p.at("dilation").get<int64_t>(), g = p.at("groups").get<int64_t>();
    if (s[1] % g != 0 || o % g != 0)
      return make_error("groups " + std::to_string(g) + " must divide the input channels (" +
                        std::to_string(s[1]) + ") and out_channels (" + std::to_string(o) + ")");
    // The bias adds per channel and keeps the product's shape.
    return op_shapes("conv2d", {{DType::F32, s}, {DType::F32, kernel_shape(p, s[1], false)}},
                     conv2d_attrs(conv_params(p, false)),
                     "a " + std::to_string(k) + "x" + std::to_string(k) + " kernel (stride " +
                         std::to_string(st) + ", dilation " + std::to_string(dil) +
                         ") does not fit the " + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
                         " input (padding " + std::to_string(pad) + ")");
  };
  d.lower = lower_conv2d;
  return d;
}

NodeTypeDef conv_transpose2d_node() {
  NodeTypeDef d = make_type(
      "mls.conv_transpose2d", "ConvTranspose2d", "Layers",
      "Transposed 2-D convolution (the gradient of Conv2d with respect to its input; "
      "upsampling in decoders and GAN generators), as PyTorch's ConvTranspose2d: [N,C,H,W] -> "
      "[N,out_channels,H',W'] with H' = (H-1) stride - 2 padding + dilation (kernel_size-1) + "
      "output_padding + 1, and a learned bias per output channel.",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef out = make_param("out_channels", ParamKind::Int, nullptr, "Number of output channels.");
  out.min = 1;
  out.max = 1 << 16;
  d.params = {
      out,
      int_param("kernel_size", 3, 1, "Kernel height and width."),
      int_param("stride", 1, 1, "Spacing of the input cells in the output (2 doubles H and W)."),
      int_param("padding", 0, 0,
                "Removed from each side of the output (as Conv2d's padding undone)."),
      int_param("output_padding", 0, 0,
                "Added to one side of the output, to pick among the sizes that "
                "a strided Conv2d maps to the same size (< stride)."),
      int_param("dilation", 1, 1, "Spacing between kernel taps."),
      int_param("groups", 1, 1, "Channel groups (in and out channels must divide by it)."),
      make_param("bias", ParamKind::Bool, true, "Learn an additive bias per channel."),
      init_param("How the kernel is initialised."),
      frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_image(s, "ConvTranspose2d"); !r) return r.error();
    int64_t o = p.at("out_channels").get<int64_t>(), g = p.at("groups").get<int64_t>();
    int64_t st = p.at("stride").get<int64_t>(), pad = p.at("padding").get<int64_t>();
    int64_t op = p.at("output_padding").get<int64_t>();
    if (s[1] % g != 0 || o % g != 0)
      return make_error("groups " + std::to_string(g) + " must divide the input channels (" +
                        std::to_string(s[1]) + ") and out_channels (" + std::to_string(o) + ")");
    if (op >= st)
      return make_error("output_padding " + std::to_string(op) +
                        " must be smaller than the stride (" + std::to_string(st) +
                        ") — lower it or raise the stride");
    return op_shapes(
        "conv_transpose2d", {{DType::F32, s}, {DType::F32, kernel_shape(p, s[1], true)}},
        conv2d_attrs(conv_params(p, true), true),
        "padding " + std::to_string(pad) + " leaves no output for the " + std::to_string(s[2]) +
            "x" + std::to_string(s[3]) + " input — lower the padding");
  };
  d.lower = lower_conv_transpose2d;
  return d;
}

NodeTypeDef pool_node(std::string id, std::string name, std::string doc, bool max) {
  NodeTypeDef d = make_type(std::move(id), std::move(name), "Layers", std::move(doc),
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = {int_param("kernel_size", 2, 1, "Window height and width."),
              int_param("stride", 0, 0, "Step between windows (0: the kernel size)."),
              int_param("padding", 0, 0, "Padding on each side.")};
  d.infer = [max](const std::vector<Shape>& in, const json& p,
                  const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_image(s, "Pooling"); !r) return r.error();
    int64_t k = p.at("kernel_size").get<int64_t>(), st = p.at("stride").get<int64_t>();
    int64_t pad = p.at("padding").get<int64_t>();
    if (st == 0) st = k;
    if (2 * pad > k)
      return make_error("padding " + std::to_string(pad) + " is more than half the window");
    return op_shapes(
        max ? "max_pool2d" : "avg_pool2d", {{DType::F32, s}}, pool2d_attrs(pool_params(p), !max),
        "a " + std::to_string(k) + "x" + std::to_string(k) + " window does not fit the " +
            std::to_string(s[2]) + "x" + std::to_string(s[3]) + " input");
  };
  d.lower = max ? lower_max_pool : lower_avg_pool;
  return d;
}

NodeTypeDef global_avg_pool_node() {
  NodeTypeDef d = make_type("mls.global_avg_pool", "Global average pool", "Layers",
                            "The mean of each channel over H and W: [N,C,H,W] -> [N,C].",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (auto r = expect_image(in[0], "GlobalAvgPool"); !r) return r.error();
    return op_shapes("mean", {{DType::F32, in[0]}},
                     {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}},
                     "GlobalAvgPool cannot take " + format_shape(in[0]));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    return Refs{global_avg_pool(c.g(), c.inputs[0])};
  };
  return d;
}

}  // namespace

void register_conv_nodes(NodeCatalogue& catalogue) {
  catalogue.add(conv2d_node());
  catalogue.add(conv_transpose2d_node());
  catalogue.add(pool_node("mls.max_pool2d", "MaxPool2d",
                          "The maximum of each window: [N,C,H,W] -> [N,C,H',W'].", true));
  catalogue.add(pool_node(
      "mls.avg_pool2d", "AvgPool2d",
      "The mean of each window (padding counts as zeros): [N,C,H,W] -> [N,C,H',W'].", false));
  catalogue.add(global_avg_pool_node());
}

}  // namespace mls::nodes
