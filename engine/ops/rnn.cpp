#include "engine/ops/rnn.h"

#include "engine/core/check.h"
#include "engine/ops/layout.h"

namespace mls {

namespace {

Ref sigmoid(Emitter& e, Ref x) {
  return e.emit1("sigmoid", {x});
}
Ref tanh(Emitter& e, Ref x) {
  return e.emit1("tanh", {x});
}

Ref add_bias(Emitter& e, Ref x, Ref b) {
  return b.valid() ? add(e, x, b) : x;
}

int64_t hidden_of(Emitter& e, Ref w_hh, int64_t gates) {
  const Shape s = e.shape_of(w_hh);
  MLS_CHECK(s.size() == 2 && s[1] == gates * s[0], "recurrent weight must be [H, gates*H]");
  return s[0];
}

// The LSTM step once the input part of the gates, gx = x_t W_ih + b [N,4H], is known.
LstmState lstm_step(Emitter& e, Ref gx, Ref h, Ref c, Ref w_hh) {
  const int64_t H = hidden_of(e, w_hh, 4);
  Refs g = split(e, add(e, gx, matmul(e, h, w_hh)), 1, {H, H, H, H});
  Ref i = sigmoid(e, g[0]), f = sigmoid(e, g[1]), cand = tanh(e, g[2]), o = sigmoid(e, g[3]);
  Ref c2 = add(e, mul(e, f, c), mul(e, i, cand));
  return {mul(e, o, tanh(e, c2)), c2};
}

// The GRU step given gx = x_t W_ih + b_ih [N,3H].
Ref gru_step(Emitter& e, Ref gx, Ref h, Ref w_hh, Ref b_hh) {
  const int64_t H = hidden_of(e, w_hh, 3);
  Refs x3 = split(e, gx, 1, {H, H, H});
  Refs h3 = split(e, add_bias(e, matmul(e, h, w_hh), b_hh), 1, {H, H, H});
  Ref r = sigmoid(e, add(e, x3[0], h3[0]));
  Ref z = sigmoid(e, add(e, x3[1], h3[1]));
  Ref n = tanh(e, add(e, x3[2], mul(e, r, h3[2])));
  return add(e, n, mul(e, z, sub(e, h, n)));  // (1 - z) n + z h
}

}  // namespace

LstmState lstm_cell(Emitter& e, Ref x_t, Ref h, Ref c, Ref w_ih, Ref w_hh, Ref b) {
  return lstm_step(e, add_bias(e, matmul(e, x_t, w_ih), b), h, c, w_hh);
}

Ref gru_cell(Emitter& e, Ref x_t, Ref h, Ref w_ih, Ref w_hh, Ref b_ih, Ref b_hh) {
  return gru_step(e, add_bias(e, matmul(e, x_t, w_ih), b_ih), h, w_hh, b_hh);
}

Unrolled unroll(Emitter& e, Ref x, Refs state, const CellFn& cell) {
  const Shape s = e.shape_of(x);
  MLS_CHECK(s.size() == 3 && s[1] >= 1, "unroll expects a sequence [N, T, F]");
  const int64_t n = s[0], steps = s[1], f = s[2];
  Refs xs = split(e, x, 1, std::vector<int64_t>(static_cast<size_t>(steps), 1));
  std::vector<Ref> outs;
  outs.reserve(static_cast<size_t>(steps));
  for (Ref x_t : xs) {
    state = cell(e, reshape(e, x_t, {n, f}), state);
    MLS_CHECK(!state.empty(), "a cell must return its state");
    Shape hs = e.shape_of(state[0]);
    hs.insert(hs.begin() + 1, 1);
    outs.push_back(reshape(e, state[0], hs));
  }
  return {concat(e, outs, 1), state};
}

Unrolled lstm(Emitter& e, Ref x, Ref h0, Ref c0, Ref w_ih, Ref w_hh, Ref b) {
  // [N,T,F] x [F,4H]: one product for every step's input gates.
  Ref gx = add_bias(e, matmul(e, x, w_ih), b);
  return unroll(e, gx, {h0, c0}, [w_hh](Emitter& em, Ref g_t, const Refs& st) {
    LstmState next = lstm_step(em, g_t, st[0], st[1], w_hh);
    return Refs{next.h, next.c};
  });
}

Unrolled gru(Emitter& e, Ref x, Ref h0, Ref w_ih, Ref w_hh, Ref b_ih, Ref b_hh) {
  Ref gx = add_bias(e, matmul(e, x, w_ih), b_ih);
  return unroll(e, gx, {h0}, [w_hh, b_hh](Emitter& em, Ref g_t, const Refs& st) {
    return Refs{gru_step(em, g_t, st[0], w_hh, b_hh)};
  });
}

}  // namespace mls
