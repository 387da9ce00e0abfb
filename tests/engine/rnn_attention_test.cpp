// The sequence composites (engine/ops/rnn.h, engine/ops/attention.h) and the new losses
// (l1_loss, huber_loss, class-weighted cross_entropy): values against float64 references
// written here, a few against numbers PyTorch printed, and gradients against central
// finite differences of those references.
#include <cmath>
#include <functional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/attention.h"
#include "engine/ops/nn.h"
#include "engine/ops/rnn.h"
#include "grad_check.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

using Vec = std::vector<double>;
using Inputs = std::vector<Vec>;


In f32_in(Shape s, Vec v) {
  return In{{DType::F32, std::move(s)}, std::move(v)};
}
In i64_in(Shape s, Vec v) {
  return In{{DType::I64, std::move(s)}, std::move(v)};
}

Vec uniform(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  Vec v(n);
  for (double& x : v) x = static_cast<float>(r.uniform(lo, hi));  // representable in f32
  return v;
}

// Compiles build(graph, inputs) and returns its outputs.
std::vector<Vec> outputs(const std::vector<In>& ins,
                         const std::function<Refs(Graph&, const Refs&)>& build) {
  Graph g("rnn_attention_test");
  Refs xs;
  for (size_t i = 0; i < ins.size(); ++i)
    xs.push_back(g.add_input("x" + std::to_string(i), ins[i].type));
  Refs outs = build(g, xs);
  g.set_outputs(outs);
  REQUIRE(g.verify().ok());
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  for (size_t i = 0; i < ins.size(); ++i)
    REQUIRE(plan->bind(xs[i], to_tensor(RefArray{ins[i].type.shape, ins[i].v}, ins[i].type.dtype))
                .ok());
  plan->run();
  std::vector<Vec> r;
  for (Ref o : outs) r.push_back(plan->tensor(o).to_f64());
  return r;
}




double sig(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// [m,k] x [k,n], row-major.
Vec mm(const Vec& a, const Vec& b, int64_t m, int64_t k, int64_t n) {
  Vec c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        c[static_cast<size_t>(i * n + j)] +=
            a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
  return c;
}

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

// [SECTION] float64 references, written from PyTorch's documented formulas

struct RnnRef {
  Vec out;   // [N,T,H]
  Vec h, c;  // [N,H]
};

// x [N,T,F]; w_ih [F,4H], w_hh [H,4H], b [4H]; gates i, f, g, o.
RnnRef lstm_ref(const Vec& x, int64_t n, int64_t t, int64_t f, int64_t hs, const Vec& w_ih,
                const Vec& w_hh, const Vec& b, Vec h, Vec c) {
  RnnRef r{Vec(at(n * t * hs)), {}, {}};
  for (int64_t s = 0; s < t; ++s) {
    Vec h2 = h, c2 = c;
    for (int64_t i = 0; i < n; ++i) {
      Vec gate(at(4 * hs));
      for (int64_t g = 0; g < 4 * hs; ++g) {
        double v = b.empty() ? 0.0 : b[at(g)];
        for (int64_t k = 0; k < f; ++k) v += x[at((i * t + s) * f + k)] * w_ih[at(k * 4 * hs + g)];
        for (int64_t k = 0; k < hs; ++k) v += h[at(i * hs + k)] * w_hh[at(k * 4 * hs + g)];
        gate[at(g)] = v;
      }
      for (int64_t j = 0; j < hs; ++j) {
        double ig = sig(gate[at(j)]), fg = sig(gate[at(hs + j)]),
               gg = std::tanh(gate[at(2 * hs + j)]), og = sig(gate[at(3 * hs + j)]);
        double cn = fg * c[at(i * hs + j)] + ig * gg;
        c2[at(i * hs + j)] = cn;
        h2[at(i * hs + j)] = og * std::tanh(cn);
        r.out[at((i * t + s) * hs + j)] = h2[at(i * hs + j)];
      }
    }
    h = h2;
    c = c2;
  }
  r.h = h;
  r.c = c;
  return r;
}

// w_ih [F,3H], w_hh [H,3H], b_ih and b_hh [3H]; gates r, z, n.
RnnRef gru_ref(const Vec& x, int64_t n, int64_t t, int64_t f, int64_t hs, const Vec& w_ih,
               const Vec& w_hh, const Vec& b_ih, const Vec& b_hh, Vec h) {
  RnnRef r{Vec(at(n * t * hs)), {}, {}};
  for (int64_t s = 0; s < t; ++s) {
    Vec h2 = h;
    for (int64_t i = 0; i < n; ++i) {
      Vec gx(at(3 * hs)), gh(at(3 * hs));
      for (int64_t g = 0; g < 3 * hs; ++g) {
        double a = b_ih[at(g)], bb = b_hh[at(g)];
        for (int64_t k = 0; k < f; ++k) a += x[at((i * t + s) * f + k)] * w_ih[at(k * 3 * hs + g)];
        for (int64_t k = 0; k < hs; ++k) bb += h[at(i * hs + k)] * w_hh[at(k * 3 * hs + g)];
        gx[at(g)] = a;
        gh[at(g)] = bb;
      }
      for (int64_t j = 0; j < hs; ++j) {
        double rg = sig(gx[at(j)] + gh[at(j)]), zg = sig(gx[at(hs + j)] + gh[at(hs + j)]);
        double ng = std::tanh(gx[at(2 * hs + j)] + rg * gh[at(2 * hs + j)]);
        h2[at(i * hs + j)] = (1 - zg) * ng + zg * h[at(i * hs + j)];
        r.out[at((i * t + s) * hs + j)] = h2[at(i * hs + j)];
      }
    }
    h = h2;
  }
  r.h = h;
  return r;
}

// q [B,Tq,d], k [B,Tk,d], v [B,Tk,dv] -> [B,Tq,dv], a direct loop.
Vec sdpa_ref(const Vec& q, const Vec& k, const Vec& v, int64_t b, int64_t tq, int64_t tk, int64_t d,
             int64_t dv, bool causal) {
  Vec o(at(b * tq * dv), 0.0);
  for (int64_t z = 0; z < b; ++z)
    for (int64_t i = 0; i < tq; ++i) {
      Vec s(at(tk));
      double mx = -1e300;
      for (int64_t j = 0; j < tk; ++j) {
        double a = 0;
        for (int64_t p = 0; p < d; ++p)
          a += q[at((z * tq + i) * d + p)] * k[at((z * tk + j) * d + p)];
        s[at(j)] = a / std::sqrt(static_cast<double>(d));
        if (!(causal && j > i)) mx = std::max(mx, s[at(j)]);
      }
      double den = 0;
      for (int64_t j = 0; j < tk; ++j) {
        s[at(j)] = causal && j > i ? 0.0 : std::exp(s[at(j)] - mx);
        den += s[at(j)];
      }
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t p = 0; p < dv; ++p)
          o[at((z * tq + i) * dv + p)] += s[at(j)] / den * v[at((z * tk + j) * dv + p)];
    }
  return o;
}

Vec add_row(Vec x, const Vec& b) {
  if (b.empty()) return x;
  for (size_t i = 0; i < x.size(); ++i) x[i] += b[i % b.size()];
  return x;
}

// Self-attention of x [N,T,E] with weights [E,E] ([in, out]) and biases [E].
Vec mha_ref(const Vec& x, int64_t n, int64_t t, int64_t e, int64_t heads, const Inputs& w,
            bool causal) {
  // w: wq, wk, wv, wo, bq, bk, bv, bo
  const int64_t d = e / heads;
  Vec q = add_row(mm(x, w[0], n * t, e, e), w[4]), k = add_row(mm(x, w[1], n * t, e, e), w[5]),
      v = add_row(mm(x, w[2], n * t, e, e), w[6]);
  Vec joined(at(n * t * e));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      Vec qh(at(t * d)), kh(at(t * d)), vh(at(t * d));
      for (int64_t s = 0; s < t; ++s)
        for (int64_t p = 0; p < d; ++p) {
          size_t src = at((b * t + s) * e + h * d + p);
          qh[at(s * d + p)] = q[src];
          kh[at(s * d + p)] = k[src];
          vh[at(s * d + p)] = v[src];
        }
      Vec oh = sdpa_ref(qh, kh, vh, 1, t, t, d, d, causal);
      for (int64_t s = 0; s < t; ++s)
        for (int64_t p = 0; p < d; ++p) joined[at((b * t + s) * e + h * d + p)] = oh[at(s * d + p)];
    }
  return add_row(mm(joined, w[3], n * t, e, e), w[7]);
}

// A deterministic input that the PyTorch script below reproduces: sin(0.37 i + phase) * amp.
Vec wave(size_t n, double phase, double amp) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase) * amp);
  return v;
}

}  // namespace

TEST_CASE("lstm_cell and gru_cell: one step against float64 hand computations", "[rnn]") {
  const int64_t n = 2, f = 3, h = 2;
  Vec x = uniform(6, 1), h0 = uniform(4, 2), c0 = uniform(4, 3);
  SECTION("lstm") {
    Vec wih = uniform(24, 4), whh = uniform(16, 5), b = uniform(8, 6);
    auto out = outputs({f32_in({n, f}, x), f32_in({n, h}, h0), f32_in({n, h}, c0),
                        f32_in({f, 4 * h}, wih), f32_in({h, 4 * h}, whh), f32_in({4 * h}, b)},
                       [](Graph& g, const Refs& v) {
                         LstmState s = lstm_cell(g, v[0], v[1], v[2], v[3], v[4], v[5]);
                         return Refs{s.h, s.c};
                       });
    RnnRef want = lstm_ref(x, n, 1, f, h, wih, whh, b, h0, c0);
    require_close(out[0], want.h, 1e-5, 1e-6, "h'");
    require_close(out[1], want.c, 1e-5, 1e-6, "c'");
    // Spot check one element by hand: the gates of sample 0, unit 1.
    auto gate = [&](int64_t col) {
      return x[0] * wih[at(col)] + x[1] * wih[at(8 + col)] + x[2] * wih[at(16 + col)] +
             h0[0] * whh[at(col)] + h0[1] * whh[at(8 + col)] + b[at(col)];
    };
    double c1 = sig(gate(3)) * c0[1] + sig(gate(1)) * std::tanh(gate(5));
    CHECK(out[1][1] == Approx(c1).epsilon(1e-5));
    CHECK(out[0][1] == Approx(sig(gate(7)) * std::tanh(c1)).epsilon(1e-5));
  }
  SECTION("gru") {
    Vec wih = uniform(18, 7), whh = uniform(12, 8), bih = uniform(6, 9), bhh = uniform(6, 10);
    auto out = outputs({f32_in({n, f}, x), f32_in({n, h}, h0), f32_in({f, 3 * h}, wih),
                        f32_in({h, 3 * h}, whh), f32_in({3 * h}, bih), f32_in({3 * h}, bhh)},
                       [](Graph& g, const Refs& v) {
                         return Refs{gru_cell(g, v[0], v[1], v[2], v[3], v[4], v[5])};
                       });
    require_close(out[0], gru_ref(x, n, 1, f, h, wih, whh, bih, bhh, h0).h, 1e-5, 1e-6, "h'");
  }
}

TEST_CASE("lstm over T steps: outputs, final state and gradients of every input", "[rnn]") {
  const int64_t n = 2, t = 4, f = 3, h = 2;
  Inputs in{uniform(at(n * t * f), 11), uniform(at(n * h), 12),     uniform(at(n * h), 13),
            uniform(at(f * 4 * h), 14), uniform(at(h * 4 * h), 15), uniform(at(4 * h), 16),
            uniform(at(n * t * h), 17), uniform(at(n * h), 18)};
  // loss = <out, R1> + <c_T, R2>: every output and the cell state reach the loss.
  auto f_ref = [&](const Inputs& v) {
    RnnRef r = lstm_ref(v[0], n, t, f, h, v[3], v[4], v[5], v[1], v[2]);
    return dot(r.out, v[6]) + dot(r.c, v[7]);
  };
  std::vector<In> ins{f32_in({n, t, f}, in[0]),  f32_in({n, h}, in[1]),     f32_in({n, h}, in[2]),
                      f32_in({f, 4 * h}, in[3]), f32_in({h, 4 * h}, in[4]), f32_in({4 * h}, in[5]),
                      f32_in({n, t, h}, in[6]),  f32_in({n, h}, in[7])};
  auto vals = outputs(ins, [](Graph& g, const Refs& v) {
    Unrolled r = lstm(g, v[0], v[1], v[2], v[3], v[4], v[5]);
    return Refs{r.out, r.last[0], r.last[1]};
  });
  RnnRef want = lstm_ref(in[0], n, t, f, h, in[3], in[4], in[5], in[1], in[2]);
  require_close(vals[0], want.out, 1e-5, 1e-6, "out");
  require_close(vals[1], want.h, 1e-5, 1e-6, "h_T");
  require_close(vals[2], want.c, 1e-5, 1e-6, "c_T");
  // The last step of `out` is h_T.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < h; ++j)
      CHECK(vals[0][at((i * t + t - 1) * h + j)] == vals[1][at(i * h + j)]);

  Evaluated r = evaluate(ins, [](Graph& g, const Refs& v) {
    Unrolled u = lstm(g, v[0], v[1], v[2], v[3], v[4], v[5]);
    return add(g, sum(g, mul(g, u.out, v[6]), {}, false),
               sum(g, mul(g, u.last[1], v[7]), {}, false));
  });
  CHECK(r.value == Approx(f_ref(in)).epsilon(1e-5));
  const char* names[] = {"x", "h0", "c0", "w_ih", "w_hh", "b"};
  for (size_t k = 0; k < 6; ++k)
    require_close(r.grads[k], fd_grad(f_ref, in, k), 1e-3, 1e-5, names[k]);
}

TEST_CASE("gru over T steps: outputs and gradients of every input", "[rnn]") {
  const int64_t n = 2, t = 3, f = 2, h = 3;
  Inputs in{uniform(at(n * t * f), 21), uniform(at(n * h), 22), uniform(at(f * 3 * h), 23),
            uniform(at(h * 3 * h), 24), uniform(at(3 * h), 25), uniform(at(3 * h), 26),
            uniform(at(n * t * h), 27)};
  auto f_ref = [&](const Inputs& v) {
    return dot(gru_ref(v[0], n, t, f, h, v[2], v[3], v[4], v[5], v[1]).out, v[6]);
  };
  std::vector<In> ins{f32_in({n, t, f}, in[0]),  f32_in({n, h}, in[1]),  f32_in({f, 3 * h}, in[2]),
                      f32_in({h, 3 * h}, in[3]), f32_in({3 * h}, in[4]), f32_in({3 * h}, in[5]),
                      f32_in({n, t, h}, in[6])};
  auto vals = outputs(ins, [](Graph& g, const Refs& v) {
    Unrolled u = gru(g, v[0], v[1], v[2], v[3], v[4], v[5]);
    return Refs{u.out, u.last[0]};
  });
  RnnRef want = gru_ref(in[0], n, t, f, h, in[2], in[3], in[4], in[5], in[1]);
  require_close(vals[0], want.out, 1e-5, 1e-6, "out");
  require_close(vals[1], want.h, 1e-5, 1e-6, "h_T");
  Evaluated r = evaluate(ins, [](Graph& g, const Refs& v) {
    return sum(g, mul(g, gru(g, v[0], v[1], v[2], v[3], v[4], v[5]).out, v[6]), {}, false);
  });
  CHECK(r.value == Approx(f_ref(in)).epsilon(1e-5));
  const char* names[] = {"x", "h0", "w_ih", "w_hh", "b_ih", "b_hh"};
  for (size_t k = 0; k < 6; ++k)
    require_close(r.grads[k], fd_grad(f_ref, in, k), 1e-3, 1e-5, names[k]);
}

TEST_CASE("unroll runs any cell, and eager and static agree", "[rnn][eager]") {
  // A cell with a running sum as its state: out_t = x_1 + ... + x_t.
  CellFn cumsum = [](Emitter& e, Ref x_t, const Refs& st) { return Refs{add(e, st[0], x_t)}; };
  Vec x = uniform(12, 31);  // [2,3,2]
  EagerSession s(host());
  Ref xr = s.leaf(to_tensor(RefArray{{2, 3, 2}, x}, DType::F32));
  Unrolled u = unroll(s, xr, {fill(s, {DType::F32, {2, 2}}, 0.0)}, cumsum);
  CHECK(s.value(u.out).shape() == Shape{2, 3, 2});
  Vec got = s.value(u.out).to_f64();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 2; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < 3; ++t) {
        acc += x[at((b * 3 + t) * 2 + j)];
        CHECK(got[at((b * 3 + t) * 2 + j)] == Approx(acc).epsilon(1e-6));
      }
    }
  // An LSTM in the eager session gives the static plan's numbers.
  Vec w_ih = uniform(16, 32), w_hh = uniform(16, 33), b = uniform(8, 34);
  auto leaf = [&](Shape sh, const Vec& v) {
    return s.leaf(to_tensor(RefArray{std::move(sh), v}, DType::F32));
  };
  Ref z = fill(s, {DType::F32, {2, 2}}, 0.0);
  Unrolled e = lstm(s, xr, z, z, leaf({2, 8}, w_ih), leaf({2, 8}, w_hh), leaf({8}, b));
  require_close(s.value(e.out).to_f64(), lstm_ref(x, 2, 3, 2, 2, w_ih, w_hh, b, Vec(4), Vec(4)).out,
                1e-5, 1e-6, "eager lstm");
}

TEST_CASE("causal_mask marks the keys after each query", "[attention]") {
  EagerSession s(host());
  for (auto [tq, tk] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 3}, {2, 5}, {5, 2}, {4, 1}, {1, 4}}) {
    INFO(tq << "x" << tk);
    Ref m = causal_mask(s, tq, tk);
    REQUIRE(s.value(m).shape() == Shape{tq, tk});
    Vec v = s.value(m).to_f64();
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) CHECK(v[at(i * tk + j)] == (j > i ? 1.0 : 0.0));
  }
}

TEST_CASE("scaled_dot_product_attention against a direct loop, with and without causal",
          "[attention]") {
  const int64_t b = 2, tq = 3, tk = 4, d = 2, dv = 3;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Inputs in{uniform(at(b * tq * d), 41, -2, 2), uniform(at(b * tk * d), 42, -2, 2),
              uniform(at(b * tk * dv), 43), uniform(at(b * tq * dv), 44)};
    std::vector<In> ins{f32_in({b, tq, d}, in[0]), f32_in({b, tk, d}, in[1]),
                        f32_in({b, tk, dv}, in[2]), f32_in({b, tq, dv}, in[3])};
    auto got = outputs(ins, [causal](Graph& g, const Refs& v) {
      return Refs{scaled_dot_product_attention(g, v[0], v[1], v[2], causal)};
    });
    require_close(got[0], sdpa_ref(in[0], in[1], in[2], b, tq, tk, d, dv, causal), 1e-5, 1e-6,
                  "attention");
    if (causal)  // query 0 sees only key 0: its output is v[0]
      for (int64_t p = 0; p < dv; ++p) CHECK(got[0][at(p)] == Approx(in[2][at(p)]).epsilon(1e-6));
    auto f_ref = [&](const Inputs& v) {
      return dot(sdpa_ref(v[0], v[1], v[2], b, tq, tk, d, dv, causal), v[3]);
    };
    Evaluated r = evaluate(ins, [causal](Graph& g, const Refs& v) {
      return sum(g, mul(g, scaled_dot_product_attention(g, v[0], v[1], v[2], causal), v[3]), {},
                 false);
    });
    const char* names[] = {"q", "k", "v"};
    for (size_t k = 0; k < 3; ++k)
      require_close(r.grads[k], fd_grad(f_ref, in, k), 1e-3, 1e-5, names[k]);
  }
}

TEST_CASE(
    "multi_head_attention against a per-head float64 loop, and gradients of x and all weights",
    "[attention]") {
  const int64_t n = 2, t = 3, e = 4, heads = 2;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    Inputs in{uniform(at(n * t * e), 51)};
    for (uint64_t k = 0; k < 4; ++k) in.push_back(uniform(at(e * e), 52 + k));
    for (uint64_t k = 0; k < 4; ++k) in.push_back(uniform(at(e), 56 + k, -0.5, 0.5));
    in.push_back(uniform(at(n * t * e), 60));
    std::vector<In> ins{f32_in({n, t, e}, in[0])};
    for (size_t k = 1; k <= 4; ++k) ins.push_back(f32_in({e, e}, in[k]));
    for (size_t k = 5; k <= 8; ++k) ins.push_back(f32_in({e}, in[k]));
    ins.push_back(f32_in({n, t, e}, in[9]));
    auto mha = [causal](Graph& g, const Refs& v) {
      return multi_head_attention(g, v[0], v[1], v[2], v[3], v[4], {v[5], v[6], v[7], v[8]}, heads,
                                  causal);
    };
    auto weights = [](const Inputs& v) { return Inputs(v.begin() + 1, v.begin() + 9); };
    auto got = outputs(ins, [&](Graph& g, const Refs& v) { return Refs{mha(g, v)}; });
    require_close(got[0], mha_ref(in[0], n, t, e, heads, weights(in), causal), 1e-5, 1e-6, "mha");
    auto f_ref = [&](const Inputs& v) {
      return dot(mha_ref(v[0], n, t, e, heads, weights(v), causal), v[9]);
    };
    Evaluated r = evaluate(
        ins, [&](Graph& g, const Refs& v) { return sum(g, mul(g, mha(g, v), v[9]), {}, false); });
    const char* names[] = {"x", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo"};
    for (size_t k = 0; k < 9; ++k)
      require_close(r.grads[k], fd_grad(f_ref, in, k), 1e-3, 1e-5, names[k]);
  }
}

// The numbers below were printed by PyTorch 1.13 (float64) for the same wave() inputs:
//   x = wave(N*T*F, 0.1, 1.0); nn.LSTM(F, H, batch_first=True) with weight_ih_l0 = W_ih^T,
//   weight_hh_l0 = W_hh^T, bias_ih_l0 = b, bias_hh_l0 = 0; nn.GRU likewise; and
//   nn.MultiheadAttention(4, 2, batch_first=True) with in_proj_weight = [Wq^T; Wk^T; Wv^T].
// They pin the conventions (gate order, weight layout, head split) to PyTorch's, which the
// float64 references above only restate.
TEST_CASE("LSTM, GRU and multi-head attention agree with PyTorch", "[rnn][attention]") {
  const int64_t n = 2, t = 3, f = 2, h = 2;
  Vec x = wave(at(n * t * f), 0.1, 1.0);
  SECTION("lstm") {
    Vec w_ih = wave(at(f * 4 * h), 0.2, 0.5), w_hh = wave(at(h * 4 * h), 0.3, 0.5),
        b = wave(at(4 * h), 0.4, 0.5);
    auto got = outputs({f32_in({n, t, f}, x), f32_in({f, 4 * h}, w_ih), f32_in({h, 4 * h}, w_hh),
                        f32_in({4 * h}, b)},
                       [](Graph& g, const Refs& v) {
                         Ref z = fill(g, {DType::F32, {2, 2}}, 0.0);
                         Unrolled u = lstm(g, v[0], z, z, v[1], v[2], v[3]);
                         return Refs{u.out, u.last[1]};
                       });
    require_close(
        got[0],
        Vec{0.0835771618751402, 0.06006095963106561, 0.15929069196510723, 0.11400744333175236,
            0.2458671218168234, 0.1849937138349973, 0.17542982577007737, 0.14561424456786182,
            0.2880098959280896, 0.2500224476080334, 0.33082753310627094, 0.29732490657180927},
        1e-5, 1e-6, "lstm out");
    require_close(
        got[1], Vec{0.4761784026190388, 0.3868059196272524, 0.6294780777928424, 0.6153329749229697},
        1e-5, 1e-6, "lstm c_n");
  }
  SECTION("gru") {
    Vec w_ih = wave(at(f * 3 * h), 0.2, 0.5), w_hh = wave(at(h * 3 * h), 0.3, 0.5),
        b_ih = wave(at(3 * h), 0.4, 0.5), b_hh = wave(at(3 * h), 0.5, 0.5);
    auto got = outputs({f32_in({n, t, f}, x), f32_in({f, 3 * h}, w_ih), f32_in({h, 3 * h}, w_hh),
                        f32_in({3 * h}, b_ih), f32_in({3 * h}, b_hh)},
                       [](Graph& g, const Refs& v) {
                         Ref z = fill(g, {DType::F32, {2, 2}}, 0.0);
                         return Refs{gru(g, v[0], z, v[1], v[2], v[3], v[4]).out};
                       });
    require_close(
        got[0],
        Vec{0.16079345059201539, 0.122739720959123, 0.2784186870355436, 0.21216718309033583,
            0.3736543097191447, 0.29063464343393935, 0.17294574648119154, 0.1427543422406461,
            0.3172055983281256, 0.26881075473527133, 0.4152277603083083, 0.3676625583690596},
        1e-5, 1e-6, "gru out");
  }
  SECTION("multi-head attention, causal") {
    const int64_t e = 4;
    Vec xe = wave(at(n * t * e), 0.1, 1.0);
    std::vector<In> ins{f32_in({n, t, e}, xe)};
    for (int k = 0; k < 4; ++k) ins.push_back(f32_in({e, e}, wave(at(e * e), 0.2 + 0.1 * k, 0.5)));
    for (int k = 0; k < 4; ++k) ins.push_back(f32_in({e}, wave(at(e), 0.6 + 0.1 * k, 0.2)));
    auto got = outputs(ins, [](Graph& g, const Refs& v) {
      return Refs{
          multi_head_attention(g, v[0], v[1], v[2], v[3], v[4], {v[5], v[6], v[7], v[8]}, 2, true)};
    });
    require_close(
        got[0],
        Vec{0.1715051008185831,  0.22742870954244027,  0.25257091023409384, 0.24352882171816242,
            0.2349612353640838,  0.2602203105530214,   0.25025977099717794, 0.20642776902427185,
            0.17210382856080791, 0.17357859401819026,  0.15156028501274005, 0.1090290376386404,
            0.0344151032792613,  0.057298069132335316, 0.07242600103987207, 0.07775142282015672,
            0.08935662873850578, 0.1317364900048678,   0.1562864335088518,  0.1596837420694786,
            0.15523965426134345, 0.18851879475652136,  0.19628279130190693, 0.1774808452247819},
        1e-5, 1e-6, "mha out");
  }
}

TEST_CASE("l1_loss and huber_loss: values and gradients on both sides of delta", "[loss]") {
  // Differences spread over (-2, 2) and kept away from 0 and +-delta, where the losses kink.
  Vec p{0.9, -1.7, 0.2, 0.05, -0.3, 1.4, 0.7, -0.6}, t{0.1, 0.2, -0.1, 0.4, 0.5, -0.2, 0.75, -0.1};
  auto l1 = [](const Inputs& v) {
    double s = 0;
    for (size_t i = 0; i < v[0].size(); ++i) s += std::abs(v[0][i] - v[1][i]);
    return s / static_cast<double>(v[0].size());
  };
  Evaluated r = evaluate({f32_in({2, 4}, p), f32_in({2, 4}, t)},
                         [](Graph& g, const Refs& v) { return l1_loss(g, v[0], v[1]); });
  CHECK(r.value == Approx(l1({p, t})).epsilon(1e-6));
  require_close(r.grads[0], fd_grad(l1, {p, t}, 0), 1e-4, 1e-7, "l1 d/dp");
  require_close(r.grads[1], fd_grad(l1, {p, t}, 1), 1e-4, 1e-7, "l1 d/dt");
  for (double delta : {1.0, 0.45}) {
    INFO("delta " << delta);
    auto huber = [delta](const Inputs& v) {
      double s = 0;
      for (size_t i = 0; i < v[0].size(); ++i) {
        double d = std::abs(v[0][i] - v[1][i]);
        s += d < delta ? 0.5 * d * d : delta * (d - 0.5 * delta);
      }
      return s / static_cast<double>(v[0].size());
    };
    Evaluated h =
        evaluate({f32_in({2, 4}, p), f32_in({2, 4}, t)},
                 [delta](Graph& g, const Refs& v) { return huber_loss(g, v[0], v[1], delta); });
    CHECK(h.value == Approx(huber({p, t})).epsilon(1e-6));
    require_close(h.grads[0], fd_grad(huber, {p, t}, 0), 1e-4, 1e-7, "huber d/dp");
    require_close(h.grads[1], fd_grad(huber, {p, t}, 1), 1e-4, 1e-7, "huber d/dt");
  }
  // PyTorch: F.huber_loss(tensor([0., 3.]), tensor([0.5, 0.]), delta=1.0) = (0.125 + 2.5) / 2.
  Evaluated k = evaluate({f32_in({2}, {0.0, 3.0}), f32_in({2}, {0.5, 0.0})},
                         [](Graph& g, const Refs& v) { return huber_loss(g, v[0], v[1], 1.0); });
  CHECK(k.value == Approx(1.3125).epsilon(1e-7));
}

TEST_CASE("class-weighted cross_entropy: PyTorch's weighted mean, with label smoothing too",
          "[loss]") {
  const int64_t n = 5, c = 3;
  Vec logits = uniform(at(n * c), 71, -2, 2);
  Vec labels{0, 2, 1, 2, 2};
  Vec w{0.5, 2.0, 1.25};
  for (double eps : {0.0, 0.1}) {
    INFO("label_smoothing " << eps);
    // PyTorch: (1 - eps) sum_i w_yi nll_i / sum_i w_yi + eps/C sum_i sum_c w_c (-logp_ic) / sum_i
    // w_yi
    auto f = [&](const Inputs& v) {
      double nll = 0, smooth = 0, den = 0;
      for (int64_t i = 0; i < n; ++i) {
        double mx = -1e300, z = 0;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, v[0][at(i * c + k)]);
        for (int64_t k = 0; k < c; ++k) z += std::exp(v[0][at(i * c + k)] - mx);
        auto logp = [&](int64_t k) { return v[0][at(i * c + k)] - mx - std::log(z); };
        auto y = static_cast<int64_t>(labels[at(i)]);
        nll -= w[at(y)] * logp(y);
        for (int64_t k = 0; k < c; ++k) smooth -= w[at(k)] * logp(k);
        den += w[at(y)];
      }
      return (1 - eps) * nll / den + eps / static_cast<double>(c) * smooth / den;
    };
    std::vector<In> ins{f32_in({n, c}, logits), i64_in({n}, labels)};
    Evaluated r = evaluate(ins, [&](Graph& g, const Refs& v) {
      return cross_entropy(g, v[0], v[1], eps, vector_constant(g, w));
    });
    CHECK(r.value == Approx(f({logits})).epsilon(1e-6));
    require_close(r.grads[0], fd_grad(f, {logits}, 0), 1e-4, 1e-7, "d/dlogits");
  }
  // All weights 1: the unweighted loss.
  auto both = outputs({f32_in({n, c}, logits), i64_in({n}, labels)}, [](Graph& g, const Refs& v) {
    return Refs{cross_entropy(g, v[0], v[1], 0.1, vector_constant(g, {1, 1, 1})),
                cross_entropy(g, v[0], v[1], 0.1)};
  });
  CHECK(both[0][0] == Approx(both[1][0]).epsilon(1e-6));
  // PyTorch: F.cross_entropy(tensor([[1., 2., 0.5], [0., -1., 3.]]), tensor([1, 2]),
  //          weight=tensor([1., 3., 0.5])) = 0.407442...
  auto pt = outputs(
      {f32_in({2, 3}, {1, 2, 0.5, 0, -1, 3}), i64_in({2}, {1, 2})}, [](Graph& g, const Refs& v) {
        return Refs{cross_entropy(g, v[0], v[1], 0.0, vector_constant(g, {1, 3, 0.5}))};
      });
  CHECK(pt[0][0] == Approx(0.40744237262929983).epsilon(1e-6));
}

TEST_CASE("vector_constant: runs share a fill, values in order", "[loss]") {
  EagerSession s(host());
  CHECK(s.value(vector_constant(s, {1, 1, 2, 3, 3, 3, 1})).to_f64() == Vec{1, 1, 2, 3, 3, 3, 1});
  CHECK(s.value(vector_constant(s, {4})).to_f64() == Vec{4});
}
