// The geometry every convolution shader shares: x [N, C, H, W], w [O, C/groups, KH, KW],
// y [N, O, OH, OW]; PyTorch's cross-correlation with stride, padding, dilation and groups.
// CONV_BINDINGS: how many buffers the including shader binds (one offset each).
layout(push_constant) uniform P {
  uint off[CONV_BINDINGS];
  uint N, C, H, W, O, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups, act, has_bias;
} pc;
