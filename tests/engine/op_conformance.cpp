// Walks the op registry, so a new op cannot skip these checks: every op must have a CPU
// kernel for its samples; every registered kernel — each (op, device, dtype) of every
// backend in the registry — must match the float64 reference on a sample, and a kernel no
// sample reaches fails the suite; a differentiable op's reverse- and forward-mode rules
// must agree with central finite differences.
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "engine/core/backend_registry.h"

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "test_util.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;
using namespace mls::test;

namespace {

// engine_tests checks the CPU; gpu_tests (tests/gpu) compiles this file again with
// MLS_CONFORMANCE_GPU and checks the GPU backends its build registered, each against the
// same float64 references (the CPU stays the fallback for what a GPU lacks).
#ifdef MLS_CONFORMANCE_GPU
constexpr bool kCpuUnderTest = false;
#else
constexpr bool kCpuUnderTest = true;
#endif

// The backends under test that open here (a GPU backend without a device is reported).
std::vector<Backend*> backends_under_test() {
  std::vector<Backend*> out;
  for (const std::string& name : backend_registry().names()) {
    auto b = backend_registry().open(name);
    if (!b) {
      WARN("device " << name << " not checked: " << b.error().message);
      continue;
    }
    if (((*b)->kind() == DeviceKind::CPU) == kCpuUnderTest) out.push_back(*b);
  }
  return out;
}

struct Case {
  const OpDef* op;
  OpSample sample;
  std::vector<RefArray> inputs;
};

std::vector<Case> all_cases() {
  cpu::init();
  std::vector<Case> cases;
  for (const OpDef* op : op_registry().all()) {
    // Each op's draws depend on its own name and samples only, so adding a sample to one op
    // does not move another op's inputs (onto a kink, say).
    uint64_t seed = 1469598103934665603ull;
    for (char ch : op->name) seed = (seed ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    REQUIRE(op->reference);
    REQUIRE(op->samples);
    auto samples = op->samples();
    INFO("op " << op->name);
    REQUIRE(!samples.empty());
    for (const OpSample& s : samples) {
      Rng rng(seed++);
      Case c{op, s, {}};
      for (const ValueType& t : s.inputs) c.inputs.push_back(random_array(t, rng, s));
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  std::string d = c.op->name + "(";
  for (size_t i = 0; i < c.sample.inputs.size(); ++i) d += (i ? ", " : "") + type_str(c.sample.inputs[i]);
  d += ")";
  if (!c.sample.attrs.items().empty()) d += " {" + c.sample.attrs.to_string() + "}";
  if (!c.sample.note.empty()) d += " " + c.sample.note;
  return d;
}

// Sum over outputs of <out_k, w_k>, in float64 through the reference.
double weighted_ref(const Case& c, const std::vector<RefArray>& in, const std::vector<RefArray>& w) {
  auto outs = c.op->reference(in, c.sample.attrs);
  double s = 0;
  for (size_t k = 0; k < outs.size(); ++k)
    for (size_t i = 0; i < outs[k].v.size(); ++i) s += outs[k].v[i] * w[k].v[i];
  return s;
}

// Runs case `c` on `backend` and compares with the reference: the dtype of the kernel it
// ran, or nullopt when the backend has none (a GPU backend: the CPU is the fallback).
std::optional<DType> check_on(const Case& c, Backend& backend) {
  std::vector<ValueType> in_t = c.sample.inputs;
  auto out_t = c.op->infer(in_t, c.sample.attrs);
  REQUIRE(out_t.ok());
  const DType kt = kernel_dtype(*c.op, in_t, *out_t);
  if (!backend.supports(*c.op, kt)) return std::nullopt;
  auto want = c.op->reference(c.inputs, c.sample.attrs);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back(to_tensor(c.inputs[i], in_t[i].dtype, backend));
  if (c.op->kind == OpKind::Update) {
    std::vector<const Tensor*> ptrs;
    for (auto& t : ins) ptrs.push_back(&t);
    backend.launch(c.op->kernel(backend.kind(), kt), KernelCall{c.sample.attrs, ptrs, {}, backend});
    backend.synchronize();
    REQUIRE(want.size() == c.op->mutated_inputs.size());
    for (size_t k = 0; k < want.size(); ++k)
      require_close(ins[static_cast<size_t>(c.op->mutated_inputs[k])].to_f64(), want[k].v, 1e-5, 1e-6,
                    "updated input " + std::to_string(c.op->mutated_inputs[k]));
  } else {
    EagerSession s(backend);
    Refs refs;
    for (auto& t : ins) refs.push_back(s.leaf(t));
    Refs outs = s.emit(c.op->name, refs, c.sample.attrs);
    REQUIRE(outs.size() == want.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      REQUIRE(s.value(outs[k]).shape() == want[k].shape);
      require_close(s.value(outs[k]).to_f64(), want[k].v, 1e-5, 1e-6, "output " + std::to_string(k));
    }
  }
  return kt;
}

// Whether `be` runs the case's op itself (the CPU runs everything; a GPU is checked on the
// ops it has kernels for, its derivatives falling back where it lacks one).
bool supports_case(const Case& c, Backend& be) {
  auto out_t = c.op->infer(c.sample.inputs, c.sample.attrs);
  return out_t && be.supports(*c.op, kernel_dtype(*c.op, c.sample.inputs, *out_t));
}

}  // namespace

TEST_CASE("every registered kernel matches its float64 reference, on every device", "[conformance]") {
  const auto cases = all_cases();
  // (op, device, dtype) of every kernel a sample ran.
  std::set<std::tuple<std::string, DeviceKind, DType>> ran;
  std::vector<DeviceKind> devices;
  for (Backend* backend : backends_under_test()) {
    Backend& be = *backend;
    const std::string name(be.name());
    devices.push_back(be.kind());
    int checked = 0;
    for (const Case& c : cases) {
      INFO(name << ": " << describe(c));
      const std::optional<DType> kt = check_on(c, be);
      // The CPU is the fallback for every other device: it must run every sample.
      if (be.kind() == DeviceKind::CPU) REQUIRE(kt);
      if (!kt) continue;
      ran.insert({c.op->name, be.kind(), *kt});
      ++checked;
    }
    INFO(name);
    CHECK(checked >= 25);
  }
  if (devices.empty() && !kCpuUnderTest) {
    WARN("no GPU device opened: nothing checked");
    return;
  }
  REQUIRE(!devices.empty());

  // A kernel that no sample reaches is a kernel nobody checked (an i64 transpose, say):
  // give the op a sample at that dtype (ops::at_dtypes).
  std::vector<std::string> unchecked;
  for (const OpDef* op : op_registry().all())
    for (DeviceKind d : devices)
      for (int t = 0; t < 8; ++t)
        if (op->kernel(d, static_cast<DType>(t)) && !ran.count({op->name, d, static_cast<DType>(t)}))
          unchecked.push_back(op->name + " on " + std::string(device_kind_name(d)) + " at " +
                              std::string(dtype_name(static_cast<DType>(t))));
  std::string list;
  for (const std::string& k : unchecked) list += "\n  " + k;
  INFO(unchecked.size() << " kernels no sample checks:" << list);
  CHECK(unchecked.empty());
}

TEST_CASE("every differentiable op's gradient matches central finite differences", "[conformance]") {
  const auto cases = all_cases();
  for (Backend* device : backends_under_test()) {
  Backend& be = *device;
  int checked = 0;
  for (const Case& c : cases) {
    if (c.op->kind != OpKind::Compute || c.sample.forward_only) continue;
    if (!supports_case(c, be)) continue;
    INFO(be.name() << ": " << describe(c));
    // Graph: outputs y_k = op(x); L = sum_k sum(y_k * w_k); grads of L w.r.t. float inputs.
    Graph g("gradcheck");
    Refs xs;
    for (size_t i = 0; i < c.inputs.size(); ++i) xs.push_back(g.add_input("x" + std::to_string(i), c.sample.inputs[i]));
    auto ys = g.add_node(c.op->name, xs, c.sample.attrs);
    REQUIRE(ys.ok());
    Rng rng(99);
    std::vector<RefArray> w;
    Ref loss;
    for (size_t k = 0; k < ys->size(); ++k) {
      ValueType yt = g.type_of((*ys)[k]);
      OpSample ws;
      w.push_back(random_array(yt, rng, ws));
      Ref wk = g.add_constant("w" + std::to_string(k), to_tensor(w.back(), DType::F32));
      Ref term = sum(g, mul(g, (*ys)[k], wk), {}, false);
      loss = loss.valid() ? add(g, loss, term) : term;
    }
    Refs wrt;
    std::vector<size_t> wrt_index;
    for (size_t i = 0; i < xs.size(); ++i)
      if (dtype_is_float(c.sample.inputs[i].dtype)) {
        wrt.push_back(xs[i]);
        wrt_index.push_back(i);
      }
    auto grads = append_backward(g, loss, wrt);
    REQUIRE(grads.ok());
    g.set_outputs(*grads);
    auto plan = CompiledPlan::compile(g, be);
    REQUIRE(plan.ok());
    for (size_t i = 0; i < xs.size(); ++i)
      REQUIRE(plan->bind(xs[i], to_tensor(c.inputs[i], c.sample.inputs[i].dtype, be)).ok());
    plan->run();
    const double h = 1e-4;
    for (size_t gi = 0; gi < wrt.size(); ++gi) {
      size_t i = wrt_index[gi];
      std::vector<double> fd(c.inputs[i].v.size());
      for (size_t j = 0; j < fd.size(); ++j) {
        auto plus = c.inputs, minus = c.inputs;
        plus[i].v[j] += h;
        minus[i].v[j] -= h;
        fd[j] = (weighted_ref(c, plus, w) - weighted_ref(c, minus, w)) / (2 * h);
      }
      require_close(plan->tensor((*grads)[gi]).to_f64(), fd, 2e-3, 2e-4, "gradient of input " + std::to_string(i));
    }
    ++checked;
  }
  INFO(be.name());
  CHECK(checked >= (kCpuUnderTest ? 15 : 5));
  }
}

TEST_CASE("every differentiable op's forward-mode rule matches a directional difference", "[conformance]") {
  const auto cases = all_cases();
  for (Backend* device : backends_under_test()) {
  Backend& be = *device;
  int checked = 0;
  for (const Case& c : cases) {
    if (c.op->kind != OpKind::Compute || c.sample.forward_only) continue;
    if (!supports_case(c, be)) continue;
    INFO(be.name() << ": " << describe(c));
    Graph g("jvpcheck");
    Refs xs, primals, tangents;
    std::vector<RefArray> tan_values(c.inputs.size());
    Rng rng(7);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      xs.push_back(g.add_input("x" + std::to_string(i), c.sample.inputs[i]));
      if (dtype_is_float(c.sample.inputs[i].dtype)) {
        OpSample ts;
        tan_values[i] = random_array(c.sample.inputs[i], rng, ts);
        primals.push_back(xs[i]);
        tangents.push_back(g.add_constant("t" + std::to_string(i), to_tensor(tan_values[i], DType::F32)));
      } else {
        tan_values[i] = RefArray{c.inputs[i].shape, std::vector<double>(c.inputs[i].v.size(), 0.0)};
      }
    }
    // Integer inputs only (a cast from bytes): there is no tangent to carry.
    if (primals.empty()) continue;
    auto ys = g.add_node(c.op->name, xs, c.sample.attrs);
    REQUIRE(ys.ok());
    Refs tout = append_jvp(g, primals, tangents, *ys);
    for (Ref t : tout) REQUIRE(t.valid());
    g.set_outputs(tout);
    auto plan = CompiledPlan::compile(g, be);
    REQUIRE(plan.ok());
    for (size_t i = 0; i < xs.size(); ++i)
      REQUIRE(plan->bind(xs[i], to_tensor(c.inputs[i], c.sample.inputs[i].dtype, be)).ok());
    plan->run();
    const double h = 1e-4;
    auto plus = c.inputs, minus = c.inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      for (size_t j = 0; j < c.inputs[i].v.size(); ++j) {
        plus[i].v[j] += h * tan_values[i].v[j];
        minus[i].v[j] -= h * tan_values[i].v[j];
      }
    auto fp = c.op->reference(plus, c.sample.attrs), fm = c.op->reference(minus, c.sample.attrs);
    for (size_t k = 0; k < tout.size(); ++k) {
      std::vector<double> fd(fp[k].v.size());
      for (size_t j = 0; j < fd.size(); ++j) fd[j] = (fp[k].v[j] - fm[k].v[j]) / (2 * h);
      require_close(plan->tensor(tout[k]).to_f64(), fd, 2e-3, 2e-4, "tangent of output " + std::to_string(k));
    }
    ++checked;
  }
  INFO(be.name());
  CHECK(checked >= (kCpuUnderTest ? 15 : 5));
  }
}
