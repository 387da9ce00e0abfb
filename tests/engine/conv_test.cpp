// Convolution and pooling beyond the conformance suite's small samples: batches large enough
// to split across threads, the error messages, and a conv/pool stack built with the
// engine/ops/conv.h builders whose gradients match finite differences of the chained
// float64 references.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/conv.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

using Ints = std::vector<int64_t>;

RefArray random_ref(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  return random_array({DType::F32, s}, rng, OpSample{});
}

// Runs `op` through the CPU kernel and checks each output against the op's float64 reference.
void check_kernel(const std::string& op, const std::vector<RefArray>& in, const Attrs& a) {
  INFO(op << " {" << a.to_string() << "}");
  const OpDef* def = op_registry().find(op);
  REQUIRE(def);
  EagerSession s(host());
  Refs refs;
  for (const RefArray& r : in) refs.push_back(s.leaf(to_tensor(r, DType::F32)));
  const Refs ys = s.emit(op, refs, a);
  const std::vector<RefArray> want = def->reference(in, a);
  REQUIRE(ys.size() == want.size());
  for (size_t k = 0; k < ys.size(); ++k) {
    REQUIRE(s.value(ys[k]).shape() == want[k].shape);
    require_close(s.value(ys[k]).to_f64(), want[k].v, 1e-4, 1e-5,
                  op + " output " + std::to_string(k));
  }
}

std::string node_error(const std::string& op, std::vector<ValueType> in, const Attrs& a) {
  Graph g("errors");
  Refs refs;
  for (size_t i = 0; i < in.size(); ++i)
    refs.push_back(g.add_input("x" + std::to_string(i), in[i]));
  auto r = g.add_node(op, refs, a);
  REQUIRE(!r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("conv kernels match the float64 reference on batches split across threads", "[conv]") {
  struct Case {
    Shape x, w;
    Attrs a;
  };
  // Stride 1 runs on the direct micro-kernels (over samples, or over tiles of one sample);
  // other strides on im2col + cpu::gemm, whose large GEMMs split across threads; 1x1 on
  // cpu::gemm alone; padding beyond the kernel's reach sends the input gradient to im2col.
  // LeNet-5's two convolutions leave partial micro-tiles in every direction. A stride-1
  // weight gradient with 16 or more output channels a group runs one GEMM per chunk of
  // samples (two of LeNet's conv2, so 13 samples on two threads leave a chunk of one).
  // Input gradients with too few input channels for the pixel tiles and rows of at most one
  // vector multiply g by the weights and fold the products back (conv_kernels.cpp): LeNet's
  // conv2, the groups, dilations and uneven paddings below.
  std::vector<Case> cases{
      {{5, 1, 28, 28}, {6, 1, 5, 5}, {{"padding", Ints{2}}}},
      {{7, 6, 14, 14}, {16, 6, 5, 5}, {}},
      {{13, 6, 14, 14}, {16, 6, 5, 5}, {}},
      {{6, 8, 9, 9},
       {32, 4, 3, 3},
       {{"padding", Ints{1}}, {"dilation", Ints{2, 1}}, {"groups", int64_t{2}}}},
      {{16, 4, 12, 12}, {8, 4, 3, 3}, {{"padding", Ints{1}}}},
      {{3, 16, 10, 10}, {24, 16, 3, 3}, {{"padding", Ints{1}}, {"dilation", Ints{1, 2}}}},
      {{1, 8, 24, 24}, {16, 8, 3, 3}, {{"padding", Ints{1}}}},
      // A row's right border is the next row's left border in the padded-width layout: uneven
      // padding with a dilated row, and a padding of 3 that reaches past a 3x3 kernel's 2
      // (the padded rows are then as wide as the output's, not w + padding).
      {{5, 4, 9, 11}, {16, 4, 3, 3}, {{"padding", Ints{0, 2}}, {"dilation", Ints{1, 2}}}},
      {{4, 3, 6, 7}, {5, 3, 3, 3}, {{"padding", Ints{1, 3}}}},
      // The weight gradient's tap rows (whole vectors of output channels, 3, 5 or 7 wide):
      // the residual CNN's stem (one input channel), 32 channels in two vectors with a 5-wide
      // kernel of 3 rows, a 7x7 kernel, groups, and a kernel taller than a tile's rows (5x3
      // with two vectors: 4 rows a tile under AVX-512, 2 under AVX2).
      {{6, 1, 28, 28}, {16, 1, 3, 3}, {{"padding", Ints{1}}}},
      {{5, 3, 9, 8}, {32, 3, 3, 5}, {{"padding", Ints{1, 2}}}},
      {{3, 2, 12, 13}, {16, 2, 7, 7}, {{"padding", Ints{3}}}},
      {{4, 4, 8, 8}, {64, 2, 3, 3}, {{"padding", Ints{1}}, {"groups", int64_t{2}}}},
      {{3, 2, 10, 9}, {32, 2, 5, 3}, {{"padding", Ints{2, 0}}}},
      // The pixel tiles of the forward and the input gradient (whole vectors of output
      // channels): the residual CNN's 16 -> 32 at 7 x 7, 32 input channels (the input
      // gradient's two vectors), and a 29-wide row in three tiles with an odd last row.
      {{3, 16, 7, 7}, {32, 16, 3, 3}, {{"padding", Ints{1}}}},
      {{2, 32, 9, 6}, {16, 32, 3, 3}, {{"padding", Ints{1}}}},
      {{2, 1, 5, 29}, {16, 1, 3, 3}, {{"padding", Ints{1}}}},
      {{9, 6, 11, 10},
       {6, 2, 3, 2},
       {{"stride", Ints{2, 1}}, {"dilation", Ints{2}}, {"groups", int64_t{3}}}},
      {{2, 16, 16, 16}, {32, 16, 3, 3}, {{"stride", Ints{2}}, {"padding", Ints{1}}}},
      // The input gradient with 16 samples across the lanes (conv_sample_lanes.cpp), where the fold
      // would run: LeNet's conv2 with a last block of 13 samples; 3x3 with padding and a
      // last block of 8; a 5x3 kernel (5 rows, 3 columns) over 5 channels, 3 a block, so the
      // second block has a channel of zero weights; uneven padding cut from both sides.
      {{29, 6, 14, 14}, {16, 6, 5, 5}, {}},
      {{24, 4, 12, 12}, {8, 4, 3, 3}, {{"padding", Ints{1}}}},
      {{16, 5, 7, 9}, {8, 5, 5, 3}, {{"padding", Ints{2, 0}}}},
      {{16, 7, 6, 6}, {4, 7, 3, 3}, {{"padding", Ints{0, 1}}}},
      // The forward with 16 samples across the lanes (at most 6 output channels): LeNet's
      // conv1 with a last block of 12 samples, and a 5x3 kernel whose rows of 11 outputs end
      // in a short column block.
      {{28, 1, 28, 28}, {6, 1, 5, 5}, {{"padding", Ints{2}}}},
      {{16, 3, 8, 11}, {5, 3, 5, 3}, {{"padding", Ints{2, 1}}}},
      // The weight gradient across the lanes (5-wide kernels, an even output width): LeNet's
      // conv2 (two blocks of 16, the output channels in blocks of 3 and a last one of 1) and
      // a 3x5 kernel with uneven padding over 20 samples (a last block of 4: not across the
      // lanes, the tap rows) and 32 (across).
      {{32, 6, 14, 14}, {16, 6, 5, 5}, {}},
      {{20, 3, 7, 8}, {5, 3, 3, 5}, {{"padding", Ints{1, 2}}}},
      {{32, 3, 7, 8}, {5, 3, 3, 5}, {{"padding", Ints{1, 2}}}},
      {{8, 8, 7, 7}, {12, 8, 1, 1}, {}},
      {{4, 3, 5, 5}, {4, 3, 1, 1}, {{"padding", Ints{1}}}},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    RefArray x = random_ref(c.x, seed++), w = random_ref(c.w, seed++);
    check_kernel("conv2d", {x, w}, c.a);
    const OpDef* conv = op_registry().find("conv2d");
    Shape ys = conv->reference(std::vector<RefArray>{x, w}, c.a)[0].shape;
    RefArray g = random_ref(ys, seed++);
    Attrs bi = c.a, bw = c.a;
    bi.set("input_shape", c.x);
    bw.set("weight_shape", c.w);
    check_kernel("conv2d_backward_input", {g, w}, bi);
    check_kernel("conv2d_backward_weight", {x, g}, bw);
    check_kernel("conv_transpose2d", {g, w}, c.a);
  }
  // The lanes forward's epilogue: the bias, relu in registers, any other act on the stored rows.
  for (const char* act : {"relu", "tanh", "none"}) {
    RefArray x = random_ref({28, 1, 28, 28}, seed++), w = random_ref({6, 1, 5, 5}, seed++),
             b = random_ref({6}, seed++);
    check_kernel("conv2d_act", {x, w, b}, {{"padding", Ints{2}}, {"act", std::string(act)}});
  }
  Attrs pool{{"kernel", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}};
  RefArray x = random_ref({8, 16, 15, 15}, seed++);
  check_kernel("max_pool2d", {x}, pool);
  check_kernel("avg_pool2d", {x}, pool);
  // A global average pool's gradient, expand [n,c,1,1] -> [n,c,h,w]: rows split over threads
  // (the residual CNN's is 28,672 rows of 7), each starting mid-way through the index.
  check_kernel("expand", {random_ref({128, 32, 1, 1}, seed++)}, {{"shape", Ints{128, 32, 7, 7}}});
  check_kernel("expand", {random_ref({1, 9, 1, 13}, seed++)}, {{"shape", Ints{3001, 9, 5, 13}}});
}

TEST_CASE("2x2 max-pool gradients go to the first largest cell, ties included, at any row width",
          "[conv]") {
  // Values from {0, 1, 2}: most windows hold ties, where the first cell in row-major order
  // wins (PyTorch's rule too). max_pool2d_relu_backward, on the same rows, drops the windows
  // whose largest cell is 0 (all of its cells 0). Rows of up to 16 windows run as groups of
  // 16 / ow row pairs across the planes (AVX-512): 15 pairs here leave a partial last group
  // at 2, 4 and 7 windows a row. Rows of 17 and 40 windows take the row function's partial
  // and whole blocks of 16.
  for (int64_t ow : {1, 2, 3, 4, 5, 7, 14, 16, 17, 40}) {
    Rng rng(static_cast<uint64_t>(ow));
    RefArray x{{5, 1, 6, 2 * ow}, {}};
    for (int64_t i = 0; i < numel(x.shape); ++i) x.v.push_back(static_cast<double>(rng.below(3)));
    RefArray g = random_ref({5, 1, 3, ow}, static_cast<uint64_t>(100 + ow));
    check_kernel("max_pool2d", {x}, {{"kernel", Ints{2}}});
    check_kernel("max_pool2d_backward", {g, x}, {{"kernel", Ints{2}}});
    check_kernel("max_pool2d_relu_backward", {g, x}, {{"kernel", Ints{2}}});
  }
}

TEST_CASE("conv2d_pool_backward_weight against float64 on each weight-gradient path", "[conv]") {
  // The weight and bias gradients through a 2x2 max pool of relu(y), y = the convolution's
  // output. 16 samples across the lanes (conv_sample_lanes.cpp): LeNet's conv1 at batch 13
  // (one block, 3 lanes empty) and 29 (two blocks on two threads, 6 channels in blocks of 3),
  // 5 channels (blocks of 3 and 2) with a 3x3 kernel, and a 5x3 kernel. The paths that route
  // the whole gradient first: 16 channels 3x3 (tap rows), 24 channels (columns and one GEMM),
  // stride 2 (im2col); groups on the per-lane tiles (each sample's gradient routed straight
  // into the tiles' rows).
  struct Case {
    Shape x, w;
    Attrs a;
  };
  const std::vector<Case> cases{
      {{13, 1, 28, 28}, {6, 1, 5, 5}, {{"padding", Ints{2}}}},
      {{29, 1, 28, 28}, {6, 1, 5, 5}, {{"padding", Ints{2}}}},
      {{16, 2, 8, 10}, {5, 2, 3, 3}, {{"padding", Ints{1}}}},
      {{16, 1, 10, 8}, {4, 1, 5, 3}, {{"padding", Ints{2, 1}}}},
      {{3, 2, 6, 6}, {16, 2, 3, 3}, {{"padding", Ints{1}}}},
      {{3, 2, 6, 6}, {24, 2, 3, 3}, {{"padding", Ints{1}}}},
      {{2, 3, 8, 8}, {4, 3, 3, 3}, {{"padding", Ints{1}}, {"stride", Ints{2}}}},
      {{3, 4, 6, 8}, {6, 2, 3, 3}, {{"padding", Ints{1}}, {"groups", int64_t{2}}}},
  };
  uint64_t seed = 700;
  for (const Case& c : cases) {
    const Shape ys =
        op_registry()
            .find("conv2d")
            ->reference(std::vector<RefArray>{random_ref(c.x, 1), random_ref(c.w, 2)}, c.a)[0]
            .shape;
    Attrs a = c.a;
    a.set("weight_shape", c.w);
    INFO("x " << shape_str(c.x) << ", w " << shape_str(c.w));
    check_kernel("conv2d_pool_backward_weight",
                 {random_ref(c.x, seed++), random_ref({ys[0], ys[1], ys[2] / 2, ys[3] / 2}, seed++),
                  random_ref(ys, seed++)},
                 a);
  }
}

TEST_CASE("conv and pooling type errors name what is wrong", "[conv]") {
  auto f = [](Shape s) { return ValueType{DType::F32, std::move(s)}; };
  CHECK(node_error("conv2d", {f({2, 3, 5, 5}), f({4, 4, 3, 3})}, {}) ==
        "conv2d: input has 3 channels but the weight expects 4 (groups 1)");
  CHECK(node_error("conv2d", {f({2, 4, 5, 5}), f({3, 2, 3, 3})}, {{"groups", int64_t{2}}}) ==
        "conv2d: the weight's 3 output channels do not split into 2 groups");
  CHECK(node_error("conv2d", {f({2, 3, 4, 4}), f({4, 3, 3, 3})}, {{"dilation", Ints{2}}}) ==
        "conv2d: the 4x4 input padded by 0x0 is smaller than the 3x3 kernel dilated by 2x2");
  CHECK(node_error("conv2d", {f({2, 3, 5, 5}), f({4, 3, 3, 3})}, {{"stride", Ints{1, 2, 3}}}) ==
        "conv2d: attribute 'stride' must be a list of one or two ints");
  CHECK(node_error("conv2d", {f({2, 3, 5, 5}), f({4, 3, 3, 3})}, {{"stride", Ints{0}}}) ==
        "conv2d: attribute 'stride' must be >= 1, got 0x0");
  CHECK(node_error("conv2d_backward_input", {f({2, 4, 3, 3}), f({4, 3, 3, 3})},
                   {{"input_shape", Ints{2, 3, 6, 6}}}) ==
        "conv2d_backward_input: gradient [2,4,3,3] is not the shape of the conv2d output "
        "[2,4,4,4] of input [2,3,6,6] and weight [4,3,3,3]");
  CHECK(node_error("conv_transpose2d", {f({2, 4, 3, 3}), f({4, 3, 3, 3})},
                   {{"stride", Ints{2}}, {"output_padding", Ints{2}}}) ==
        "conv_transpose2d: output_padding 2x2 must be smaller than the stride 2x2");
  CHECK(node_error("max_pool2d", {f({2, 3, 5, 5})}, {{"kernel", Ints{2}}, {"padding", Ints{2}}}) ==
        "max_pool2d: padding 2x2 must be at most half the 2x2 window");
  CHECK(node_error("avg_pool2d", {f({2, 3, 5})}, {{"kernel", Ints{2}}}) ==
        "avg_pool2d: expects an input [N,C,H,W], got [2,3,5]");
  CHECK(node_error("max_pool2d", {f({2, 3, 5, 5})}, {}) ==
        "max_pool2d: missing attribute 'kernel'");
}

TEST_CASE("a conv/pool stack from the builders: gradients match chained float64 references",
          "[conv]") {
  // L = sum(w_out * global_avg_pool(avg_pool(conv_transpose(max_pool(tanh(conv(x, w1) + b)), w2))))
  const Conv2dParams c1{.padding = {1, 1}};
  const Conv2dParams c2{.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}};
  const Pool2dParams mp{.kernel = {2, 2}},
      ap{.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
  Graph g("stack");
  Ref x = g.add_input("x", {DType::F32, {2, 2, 8, 8}});
  Ref w1 = g.add_input("w1", {DType::F32, {3, 2, 3, 3}});
  Ref b = g.add_input("b", {DType::F32, {3, 1, 1}});
  Ref w2 = g.add_input("w2", {DType::F32, {3, 2, 3, 3}});
  Ref h = max_pool2d(g, g.emit1("tanh", {add(g, conv2d(g, x, w1, c1), b)}), mp);
  Ref y = global_avg_pool(g, avg_pool2d(g, conv_transpose2d(g, h, w2, c2), ap));
  REQUIRE(g.type_of(y).shape == Shape{2, 2});
  RefArray wout = random_ref({2, 2}, 50);
  Ref loss = sum(g, mul(g, y, g.add_constant("wout", to_tensor(wout, DType::F32))), {}, false);
  auto grads = append_backward(g, loss, Refs{x, w1, b, w2});
  REQUIRE(grads.ok());
  g.set_outputs(*grads);

  std::vector<RefArray> vals{random_ref({2, 2, 8, 8}, 51), random_ref({3, 2, 3, 3}, 52),
                             random_ref({3, 1, 1}, 53), random_ref({3, 2, 3, 3}, 54)};
  auto run = [](const std::string& op, std::vector<RefArray> in, const Attrs& a) {
    return op_registry().find(op)->reference(in, a)[0];
  };
  auto f = [&](const std::vector<RefArray>& v) {
    RefArray t = run("conv2d", {v[0], v[1]}, conv2d_attrs(c1));
    for (size_t i = 0; i < t.v.size(); ++i) t.v[i] = std::tanh(t.v[i] + v[2].v[i / 64 % 3]);
    t = run("max_pool2d", {t}, pool2d_attrs(mp));
    t = run("conv_transpose2d", {t, v[3]}, conv2d_attrs(c2, true));
    t = run("avg_pool2d", {t}, pool2d_attrs(ap, true));
    t = run("mean", {t}, {{"axes", Ints{2, 3}}, {"keepdims", int64_t{0}}});
    double l = 0;
    for (size_t i = 0; i < t.v.size(); ++i) l += t.v[i] * wout.v[i];
    return l;
  };
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  Refs ins{x, w1, b, w2};
  for (size_t i = 0; i < ins.size(); ++i)
    REQUIRE(plan->bind(ins[i], to_tensor(vals[i], DType::F32)).ok());
  plan->run();
  const double step = 1e-4;
  for (size_t i = 0; i < ins.size(); ++i) {
    std::vector<double> fd(vals[i].v.size());
    for (size_t j = 0; j < fd.size(); ++j) {
      auto plus = vals, minus = vals;
      plus[i].v[j] += step;
      minus[i].v[j] -= step;
      fd[j] = (f(plus) - f(minus)) / (2 * step);
    }
    require_close(plan->tensor((*grads)[i]).to_f64(), fd, 2e-3, 2e-4,
                  "gradient of input " + std::to_string(i));
  }
}

// Not run by default: engine_tests "[.bench]". Times the kernels alone, outputs preallocated
// (as a compiled plan runs them).
TEST_CASE("conv2d and max_pool2d timings (LeNet-5 layers, batch 128)", "[.bench]") {
  struct Case {
    const char* name;
    Shape x, w;
    Attrs a;
  };
  std::vector<Case> cases{
      {"conv1 1->6 5x5 pad 2, 28x28", {128, 1, 28, 28}, {6, 1, 5, 5}, {{"padding", Ints{2}}}},
      {"conv2 6->16 5x5, 14x14", {128, 6, 14, 14}, {16, 6, 5, 5}, {}}};
  auto time = [](const char* name, const char* op, std::vector<const Tensor*> in, Tensor& out,
                 const Attrs& a) {
    KernelFn fn = op_registry().find(op)->kernel(DeviceKind::CPU, DType::F32);
    Tensor* outs[] = {&out};
    KernelCall call{a, in, outs, host()};
    fn(call);  // warm-up
    const int reps = 50;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn(call);
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - t0;
    std::printf("%-30s %-24s %8.3f ms\n", name, op, ms.count() / reps);
  };
  auto zeros = [](const Shape& s) { return Tensor::zeros(host(), DType::F32, s, AllocTag::Other); };
  for (const Case& c : cases) {
    Tensor x = to_tensor(random_ref(c.x, 1), DType::F32);
    Tensor w = to_tensor(random_ref(c.w, 2), DType::F32);
    std::vector<ValueType> types{{DType::F32, c.x}, {DType::F32, c.w}};
    Shape ys = (*op_registry().find("conv2d")->infer(types, c.a))[0].shape;
    Tensor y = zeros(ys), dx = zeros(c.x), dw = zeros(c.w);
    Attrs bw = c.a, bi = c.a;
    bw.set("weight_shape", c.w);
    bi.set("input_shape", c.x);
    time(c.name, "conv2d", {&x, &w}, y, c.a);
    time(c.name, "conv2d_backward_weight", {&x, &y}, dw, bw);
    time(c.name, "conv2d_backward_input", {&y, &w}, dx, bi);
    Attrs pool = pool2d_attrs({.kernel = {2, 2}});
    Tensor p = zeros({ys[0], ys[1], ys[2] / 2, ys[3] / 2}), dy = zeros(ys);
    time(c.name, "max_pool2d", {&y}, p, pool);
    time(c.name, "max_pool2d_backward", {&p, &y}, dy, pool);
  }
}
