// Recurrent cells (LSTM, GRU) and the unrolling of a cell over a sequence. Composites of
// existing ops (matmul, split, sigmoid, tanh, concat), so every backend and every
// derivative comes for free; a sequence of T steps becomes T copies of the cell in the
// static graph (backpropagation through time is ordinary reverse mode over them).
//
//   // x [N,T,F]; weights as PyTorch's, transposed: w_ih [F,4H], w_hh [H,4H], b [4H]
//   Ref h0 = fill(e, {DType::F32, {N, H}}, 0), c0 = h0;
//   Unrolled r = lstm(e, x, h0, c0, w_ih, w_hh, b);
//   r.out;      // [N,T,H], the hidden state after every step
//   r.last[0];  // [N,H], the final hidden state (r.last[1]: the final cell state)
//
// Weights are stored [in, out] as Linear's, i.e. PyTorch's weight_ih_l0 transposed, with
// the gate blocks in PyTorch's order along the columns: LSTM i, f, g, o; GRU r, z, n.
#pragma once

#include <functional>

#include "engine/ir/emitter.h"

namespace mls {

struct LstmState {
  Ref h, c;  // [N,H] each
};

// One LSTM step (PyTorch's formulas): gates = x_t W_ih + h W_hh + b split into i, f, g, o;
// c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c'). x_t [N,F], h and c
// [N,H], w_ih [F,4H], w_hh [H,4H], b [4H] (PyTorch's b_ih + b_hh; invalid: no bias).
LstmState lstm_cell(Emitter& e, Ref x_t, Ref h, Ref c, Ref w_ih, Ref w_hh, Ref b);

// One GRU step (PyTorch's formulas): with gx = x_t W_ih + b_ih and gh = h W_hh + b_hh split
// into r, z, n blocks: r = sigmoid(gx_r + gh_r), z = sigmoid(gx_z + gh_z),
// n = tanh(gx_n + r gh_n), h' = (1 - z) n + z h. b_hh stays apart from b_ih because r
// multiplies it. w_ih [F,3H], w_hh [H,3H], biases [3H] (invalid: none).
Ref gru_cell(Emitter& e, Ref x_t, Ref h, Ref w_ih, Ref w_hh, Ref b_ih, Ref b_hh);

// A cell for `unroll`: the input of one step [N,F'] and the state -> the next state, whose
// first element is the step's output [N,H].
using CellFn = std::function<Refs(Emitter& e, Ref x_t, const Refs& state)>;

struct Unrolled {
  Ref out;    // [N,T,H]: the output of every step, stacked along axis 1
  Refs last;  // the state after the last step
};

// Runs `cell` over the T steps of x [N,T,F'] (one split into T slices, the step outputs
// stacked with one concat), starting from `state`.
Unrolled unroll(Emitter& e, Ref x, Refs state, const CellFn& cell);

// The whole layers. The input projections of all steps are one matmul ([N*T,F] x [F,4H])
// before the loop; only h W_hh is computed per step. last = {h_T, c_T} (LSTM), {h_T} (GRU).
Unrolled lstm(Emitter& e, Ref x, Ref h0, Ref c0, Ref w_ih, Ref w_hh, Ref b);
Unrolled gru(Emitter& e, Ref x, Ref h0, Ref w_ih, Ref w_hh, Ref b_ih, Ref b_hh);

}  // namespace mls
