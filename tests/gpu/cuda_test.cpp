// The CUDA backend on the first GPU the runtime reports: copies (through the staging memory
// in chunks), the buffer cache, cuBLAS GEMMs and the elementwise and reduction kernels on
// shapes larger than the conformance samples (odd sizes, broadcast batches, block
// reductions), plans that replay a recorded step as a CUDA graph, and nodes the device lacks
// running on the host with explicit transfers. Without a GPU each test says it skipped.
#include <cmath>
#include <cstring>

#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/fused.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"
#include "gpu/cuda/cublas_api.h"
#include "tests/engine/test_util.h"
#include "tests/gpu/gpu_test_util.h"

#ifdef MLSTUDIO_HAVE_CUDA

using namespace mls;
using namespace mls::test;

namespace {

cuda::CudaBackend* open_cuda() {
  Backend* b = open_or_skip("cuda");
  return b ? static_cast<cuda::CudaBackend*>(b) : nullptr;
}

std::vector<float> randoms(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

Tensor on(Backend& b, const Shape& s, const std::vector<float>& v) {
  return Tensor::from_f32(b, s, v);
}

// max |a - b| / (1 + |b|)
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  return m;
}

// The same op on the device and on the CPU, from the same float inputs.
double device_vs_cpu(Backend& dev, std::string_view op, const std::vector<Shape>& shapes,
                     const Attrs& attrs, uint64_t seed, double lo = -1, double hi = 1) {
  EagerSession s(dev), c(host());
  Refs xs, xc;
  for (const Shape& sh : shapes) {
    auto v = randoms(static_cast<size_t>(numel(sh)), seed++, lo, hi);
    xs.push_back(s.leaf(on(dev, sh, v)));
    xc.push_back(c.leaf(on(host(), sh, v)));
  }
  Ref y = s.emit_first(op, xs, attrs);
  Ref yc = c.emit_first(op, xc, attrs);
  return rel_diff(s.value(y).to_f64(), c.value(yc).to_f64());
}

}  // namespace

TEST_CASE("cuda: the device opens and lists itself", "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  auto devices = cuda::list_devices();
  REQUIRE(devices.ok());
  REQUIRE(!devices->empty());
  CHECK(cu->name() == "cuda");
  CHECK(cu->device_name() == (*devices)[0].name);
  CHECK((*devices)[0].memory_bytes > 0);
  CHECK(cu->kind() == DeviceKind::CUDA);
  CHECK(!cu->default_buffer_type().host_accessible());
  CHECK(cu->default_buffer_type().alignment() == 256);
  CHECK(cu->max_kernel_inputs() == 8);
  // A device that is not there is a clear error, not a crash.
  auto missing = backend_registry().open("cuda:" + std::to_string(devices->size()));
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("CUDA device") != std::string::npos);
}

TEST_CASE("cuda: copies to and from the device and between buffers keep every byte", "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  std::vector<uint8_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  auto a = cu->allocate(1000, AllocTag::Other);
  auto b = cu->allocate(1500, AllocTag::Other);
  cu->copy_to_device(*a, 0, src.data(), src.size());
  cu->copy_device(*a, 100, *b, 333, 600);  // odd offsets, queued on the stream
  std::vector<uint8_t> out(600);
  cu->copy_to_host(*b, 333, out.data(), out.size());  // waits for the queued copy
  for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == src[100 + i]);
  Tensor t = Tensor::from_i64(*cu, {3}, {-5, int64_t{1} << 40, 7});
  CHECK(t.to_f64() == std::vector<double>{-5, static_cast<double>(int64_t{1} << 40), 7});

  // Larger than the 16 MiB staging memory, at an odd offset: the copies go in chunks.
  const size_t big = (size_t{40} << 20) + 13;
  std::vector<uint8_t> in(big), back(big);
  for (size_t i = 0; i < big; ++i) in[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  auto c = cu->allocate(big + 7, AllocTag::Other);
  cu->copy_to_device(*c, 7, in.data(), big);
  cu->copy_to_host(*c, 7, back.data(), big);
  CHECK(std::memcmp(in.data(), back.data(), big) == 0);
}

TEST_CASE("cuda: freed buffers are reused from the cache and the tracker counts live ones",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  cu->release_cached();
  CHECK(cu->cached_bytes() == 0);
  const auto act = tag_index(AllocTag::Activation);
  const auto before = cu->memory().stats();
  void* first = nullptr;
  {
    auto a = cu->allocate(5000, AllocTag::Activation);
    first = a->native_handle();
    CHECK(cu->memory().stats().current[act] - before.current[act] == 5000);  // the bytes asked for
    CHECK(cu->memory().stats().alloc_count == before.alloc_count + 1);
  }
  const size_t cached = cu->cached_bytes();
  CHECK(cached >= 5000);  // the size class, which the tracker does not count
  CHECK(cu->memory().stats().current[act] == before.current[act]);
  CHECK(cu->memory().stats().free_count == before.free_count + 1);
  auto b = cu->allocate(4900, AllocTag::Activation);  // the same size class: from the cache
  CHECK(b->native_handle() == first);
  CHECK(cu->cached_bytes() < cached);
  CHECK(b->host_ptr() == nullptr);
}

TEST_CASE("cuda: kernels read views at any offset and write into slices", "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  std::vector<float> v = randoms(7 * 9, 1);
  Tensor x = on(*cu, {7, 9}, v);
  Tensor xc = on(host(), {7, 9}, v);
  // Rows 1..5, columns 1..8: a view starting 10 floats in, its rows 9 apart.
  EagerSession s(*cu), c(host());
  Tensor view = x.slice(0, 1, 6).slice(1, 1, 9);
  Tensor cview = xc.slice(0, 1, 6).slice(1, 1, 9);
  Ref y = exp(s, s.leaf(view));
  Ref yc = exp(c, c.leaf(cview));
  CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-6);
  Ref t = s.emit1("transpose", {s.leaf(x)}, {{"perm", std::vector<int64_t>{1, 0}}});
  Ref tc = c.emit1("transpose", {c.leaf(xc)}, {{"perm", std::vector<int64_t>{1, 0}}});
  CHECK(s.value(t).to_f64() == c.value(tc).to_f64());
  // A broadcast over a transposed view gathers through its strides.
  Ref sum = add(s, s.leaf(x.transpose(0, 1)), s.leaf(on(*cu, {9, 1}, randoms(9, 2))));
  Ref sumc = add(c, c.leaf(xc.transpose(0, 1)), c.leaf(on(host(), {9, 1}, randoms(9, 2))));
  CHECK(rel_diff(s.value(sum).to_f64(), c.value(sumc).to_f64()) < 1e-6);
}

TEST_CASE("cuda: elementwise ops and a fused program over broadcasts match the CPU", "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  for (const char* op : {"exp", "tanh", "sigmoid", "gelu", "silu", "abs"}) {
    INFO(op);
    CHECK(device_vs_cpu(*cu, op, {{33, 31}}, {}, 11, -4, 4) < 1e-6);
  }
  CHECK(device_vs_cpu(*cu, "softplus", {{1000}}, {{"beta", 2.0}, {"threshold", 20.0}}, 12, -20,
                      20) < 1e-6);
  CHECK(device_vs_cpu(*cu, "rsqrt", {{1000}}, {}, 13, 0.01, 4) < 1e-6);
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum"}) {
    INFO(op);
    CHECK(device_vs_cpu(*cu, op, {{4, 1, 5, 6}, {3, 1, 6}}, {}, 21) < 1e-6);
  }
  auto p = FusedProgram::parse("t0=sub(x0,x1); mul(t0,gelu(t0))");
  REQUIRE(p.ok());
  auto va = randoms(64 * 70, 5), vb = randoms(70, 6);
  EagerSession s(*cu), c(host());
  Ref y = fused_elementwise(s, Refs{s.leaf(on(*cu, {64, 70}, va)), s.leaf(on(*cu, {70}, vb))}, *p);
  Ref yc = fused_elementwise(
      c, Refs{c.leaf(on(host(), {64, 70}, va)), c.leaf(on(host(), {70}, vb))}, *p);
  CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-6);
}

TEST_CASE("cuda: GEMMs across odd shapes, transposes, batches, bias and activation match the CPU",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{130, 70}, {70, 97}, false, false},
      {{70, 130}, {97, 70}, true, true},
      {{130, 70}, {97, 70}, false, true},
      {{70, 130}, {70, 97}, true, false},
      {{3, 65, 33}, {33, 64}, false, false},           // a batch against one w: folded into rows
      {{2, 33, 65}, {2, 129, 33}, true, true},         // one strided-batched call
      {{33, 65}, {4, 65, 17}, false, false},           // a broadcast a (batch stride 0)
      {{2, 1, 33, 65}, {1, 3, 65, 17}, false, false},  // broadcasts that do not merge: a loop
      {{1, 1}, {1, 200}, false, false},
      {{5, 1}, {1, 3}, false, false}};
  uint64_t seed = 10;
  for (const Case& k : cases) {
    INFO(shape_str(k.a) << (k.ta ? "^T" : "") << " x " << shape_str(k.b) << (k.tb ? "^T" : ""));
    auto va = randoms(static_cast<size_t>(numel(k.a)), seed++),
         vb = randoms(static_cast<size_t>(numel(k.b)), seed++);
    EagerSession s(*cu), c(host());
    Ref y = matmul(s, s.leaf(on(*cu, k.a, va)), s.leaf(on(*cu, k.b, vb)), k.ta, k.tb);
    Ref yc = matmul(c, c.leaf(on(host(), k.a, va)), c.leaf(on(host(), k.b, vb)), k.ta, k.tb);
    REQUIRE(s.value(y).shape() == c.value(yc).shape());
    CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
  }
  // linear_act: x [150, 90] (and a batch [3, 50, 90]) w [90, 70] + bias, each activation.
  auto vx = randoms(150 * 90, 1), vw = randoms(90 * 70, 2), vb = randoms(70, 3);
  for (const Shape& xs : {Shape{150, 90}, Shape{3, 50, 90}}) {
    for (const auto& [act, name] : kEpilogueActs) {
      INFO(shape_str(xs) << " " << name);
      EagerSession s(*cu), c(host());
      Ref y = linear_act(s, s.leaf(on(*cu, xs, vx)), s.leaf(on(*cu, {90, 70}, vw)),
                         s.leaf(on(*cu, {70}, vb)), name);
      Ref yc = linear_act(c, c.leaf(on(host(), xs, vx)), c.leaf(on(host(), {90, 70}, vw)),
                          c.leaf(on(host(), {70}, vb)), name);
      CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
    }
  }
}

TEST_CASE("cuda: reductions large enough for a block each, softmax and argmax match the CPU",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  auto v = randoms(300 * 70, 5);
  const std::vector<std::vector<int64_t>> axes{{0}, {1}, {}, {0, 1}};
  for (const auto& ax : axes) {
    for (const char* op : {"sum", "mean", "max", "min"}) {
      INFO(op << " over " << ax.size() << " axes");
      EagerSession s(*cu), c(host());
      Attrs a{{"axes", ax}, {"keepdims", int64_t{0}}};
      Ref y = s.emit1(op, {s.leaf(on(*cu, {300, 70}, v))}, a);
      Ref yc = c.emit1(op, {c.leaf(on(host(), {300, 70}, v))}, a);
      CHECK(rel_diff(s.value(y).to_f64(), c.value(yc).to_f64()) < 1e-5);
    }
  }
  // Outer and inner axes of a 4-D tensor at once, kept as size-1 dims.
  CHECK(device_vs_cpu(*cu, "sum", {{6, 5, 7, 9}},
                      Attrs{{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{1}}},
                      7) < 1e-5);
  for (int64_t axis : {0, 1}) {
    INFO("axis " << axis);
    CHECK(device_vs_cpu(*cu, "softmax", {{300, 70}}, Attrs{{"axis", axis}}, 8) < 1e-5);
    CHECK(device_vs_cpu(*cu, "log_softmax", {{300, 70}}, Attrs{{"axis", axis}}, 9) < 1e-5);
    CHECK(device_vs_cpu(*cu, "argmax", {{300, 70}}, Attrs{{"axis", axis}}, 10) == 0);
  }
}

TEST_CASE("cuda: a compiled step is recorded once as a CUDA graph and replayed, reading new inputs",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {64, 32}});
  Ref w = g.add_param("w", {DType::F32, {32, 16}});
  Ref h = relu(g, matmul(g, x, w));
  Ref loss = mean(g, mul(g, h, h), {}, false);
  g.set_outputs({loss, h});
  auto plan = CompiledPlan::compile(g, *cu);
  REQUIRE(plan.ok());
  Tensor xt = on(*cu, {64, 32}, randoms(64 * 32, 1));
  Tensor wt = on(*cu, {32, 16}, randoms(32 * 16, 2));
  REQUIRE(plan->bind(x, xt).ok());
  REQUIRE(plan->bind(w, wt).ok());
  plan->run();
  CHECK(plan->replaying());
  const double first = plan->tensor(loss).to_f64()[0];
  const uint64_t launches = cu->launch_count();
  const uint64_t replays = cu->replay_count();
  // New input values, same buffer: the replay reads them.
  auto vx2 = randoms(64 * 32, 3);
  xt.fill_from_host(vx2);
  plan->run();
  CHECK(cu->launch_count() == launches);  // nothing launched again: the graph ran
  CHECK(cu->replay_count() == replays + 1);
  const double second = plan->tensor(loss).to_f64()[0];
  CHECK(second != first);
  // The same step on the CPU gives the same loss.
  auto cplan = CompiledPlan::compile(g, host());
  REQUIRE(cplan.ok());
  REQUIRE(cplan->bind(x, on(host(), {64, 32}, vx2)).ok());
  REQUIRE(cplan->bind(w, on(host(), {32, 16}, randoms(32 * 16, 2))).ok());
  cplan->run();
  CHECK(std::abs(second - cplan->tensor(loss).to_f64()[0]) <= 1e-5 * std::abs(second));
}

TEST_CASE("cuda: a node the device has no kernel for runs on the host with explicit transfers",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  const OpDef* emb = op_registry().find("embedding");
  REQUIRE(emb);
  REQUIRE(!cu->supports(*emb, DType::F32));
  Graph g("lookup");
  Ref table = g.add_param("table", {DType::F32, {10, 4}});
  Ref ids = g.add_input("ids", {DType::I64, {6}});
  Ref e = embedding(g, table, ids);
  Ref y = relu(g, scale(g, e, 2.0));
  g.set_outputs({y});
  auto plan = CompiledPlan::compile(g, *cu);
  REQUIRE(plan.ok());
  REQUIRE(plan->fallbacks().size() == 1);
  CHECK(plan->fallbacks()[0].find("embedding") != std::string::npos);
  CHECK(plan->stats().transfers == 3);  // table and ids to the host, the rows back
  CHECK(plan->to_text().find("to_host") != std::string::npos);
  auto vt = randoms(40, 7);
  const std::vector<int64_t> vi{3, 0, 9, 3, 5, 1};
  REQUIRE(plan->bind(table, on(*cu, {10, 4}, vt)).ok());
  REQUIRE(plan->bind(ids, Tensor::from_i64(*cu, {6}, vi)).ok());
  plan->set_profiling(true);
  plan->run();
  CHECK(!plan->replaying());  // host steps between the device's: launched step by step
  std::vector<double> want;
  for (int64_t i : vi)
    for (int k = 0; k < 4; ++k)
      want.push_back(std::max(0.0, 2.0 * vt[static_cast<size_t>(i * 4 + k)]));
  CHECK(rel_diff(plan->tensor(y).to_f64(), want) < 1e-6);
  // The profiler shows the copies as steps of their own.
  int to_host = 0, to_device = 0;
  for (const auto& st : plan->step_times()) {
    to_host += st.op == "to_host";
    to_device += st.op == "to_device";
  }
  CHECK(to_host == 2);
  CHECK(to_device == 1);
  // Eagerly too: the session copies to the host and back.
  EagerSession s(*cu);
  Ref r =
      s.emit1("embedding", {s.leaf(on(*cu, {10, 4}, vt)), s.leaf(Tensor::from_i64(*cu, {6}, vi))});
  CHECK(&s.value(r).backend() == cu);
  std::vector<double> rows;
  for (int64_t i : vi)
    for (int k = 0; k < 4; ++k) rows.push_back(vt[static_cast<size_t>(i * 4 + k)]);
  CHECK(s.value(r).to_f64() == rows);
}

TEST_CASE("cuda: the fusion passes fuse only into kernels the device has, within its input limit",
          "[cuda]") {
  auto* cu = open_cuda();
  if (!cu) return;
  FusionSupport s = FusionSupport::of(*cu);
  CHECK(s.linear_act);
  CHECK(s.conv2d_act);
  CHECK(s.elementwise);
  CHECK(s.max_inputs == cu->max_kernel_inputs());
  // Ten inputs summed in a chain: one fused node on the CPU, none over 8 inputs on CUDA.
  Graph g("sum10");
  Refs xs;
  for (int i = 0; i < 10; ++i)
    xs.push_back(g.add_input("x" + std::to_string(i), {DType::F32, {8}}));
  Ref acc = xs[0];
  for (int i = 1; i < 10; ++i) acc = add(g, acc, exp(g, xs[static_cast<size_t>(i)]));
  g.set_outputs({acc});
  auto widest = [](const Graph& f) {
    size_t n = 0;
    for (const Node& node : f.nodes())
      if (node.op->name == "fused_elementwise") n = std::max(n, node.inputs.size());
    return n;
  };
  CHECK(widest(fuse_elementwise(g, FusionSupport::of(host()))) == 10);
  CHECK(widest(fuse_elementwise(g, s)) <= 8);
}

// cuBLAS is not linked but loaded when a device opens: where this build found the CUDA
// toolkit, its libcublas loads and has every function the backend calls (no GPU needed).
TEST_CASE("cuda: cuBLAS loads on demand with every function the backend calls", "[cuda]") {
  std::string error;
  const cuda::CublasApi* api = cuda::load_cublas(&error);
  INFO(error);
  REQUIRE(api != nullptr);
  CHECK(api->create);
  CHECK(api->destroy);
  CHECK(api->set_stream);
  CHECK(api->set_workspace);
  CHECK(api->set_math_mode);
  CHECK(api->sgemm_strided_batched);
  CHECK(api->gemm_strided_batched_ex);
  REQUIRE(api->status_string);
  CHECK(std::string(api->status_string(CUBLAS_STATUS_NOT_INITIALIZED)) != "");
  // Loaded once: the same table again.
  CHECK(cuda::load_cublas(nullptr) == api);
  CHECK(&cuda::cublas_api() == api);
}

#endif  // MLSTUDIO_HAVE_CUDA
