// Direct convolutions over NCHW (gpu/vulkan/shaders/conv2d*.comp): one thread per output
// element for the forward (bias and activation applied before the store), one per input
// element for the input gradient (no atomics), one block per weight for the weight gradient
// (its threads split the sum and add up in shared memory).
#include "gpu/cuda/device/common.cuh"

namespace mls::cuda::dev {

namespace {

__global__ void __launch_bounds__(kThreads)
    conv2d_kernel(float* y, const float* x, const float* w, const float* bias, const ConvGeom g) {
  const int64_t cg = g.C / g.groups, og = g.O / g.groups;
  MLS_GRID_LOOP(i, g.N * g.O * g.OH * g.OW) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, o = (i / (g.OW * g.OH)) % g.O;
    const int64_t n = i / (g.OW * g.OH * g.O);
    const int64_t c0 = (o / og) * cg;
    float acc = 0.f;
    for (int64_t c = 0; c < cg; ++c) {
      const float* xp = x + (n * g.C + c0 + c) * g.H * g.W;
      const float* wp = w + (o * cg + c) * g.KH * g.KW;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t h = oh * g.sh + kh * g.dh - g.ph;
        if (h < 0 || h >= g.H) continue;
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t ww = ow * g.sw + kw * g.dw - g.pw;
          if (ww < 0 || ww >= g.W) continue;
          acc += xp[h * g.W + ww] * wp[kh * g.KW + kw];
        }
      }
    }
    if (bias) acc += bias[o];
    y[i] = epilogue(acc, g.act);
  }
}

// dx[n, c, h, w] = sum over the outputs whose window reads (h, w) of g[n, o, oh, ow] * w[o, c, kh,
// kw].
__global__ void __launch_bounds__(kThreads)
    conv2d_backward_input_kernel(float* dx, const float* gy, const float* w, const ConvGeom g) {
  const int64_t cg = g.C / g.groups, og = g.O / g.groups;
  MLS_GRID_LOOP(i, g.N * g.C * g.H * g.W) {
    const int64_t xw = i % g.W, xh = (i / g.W) % g.H, c = (i / (g.W * g.H)) % g.C;
    const int64_t n = i / (g.W * g.H * g.C);
    const int64_t grp = c / cg, cc = c % cg;
    float acc = 0.f;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t th = xh + g.ph - kh * g.dh;
      if (th < 0 || th % g.sh != 0) continue;
      const int64_t oh = th / g.sh;
      if (oh >= g.OH) continue;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t tw = xw + g.pw - kw * g.dw;
        if (tw < 0 || tw % g.sw != 0) continue;
        const int64_t ow = tw / g.sw;
        if (ow >= g.OW) continue;
        for (int64_t oo = 0; oo < og; ++oo) {
          const int64_t o = grp * og + oo;
          acc += gy[((n * g.O + o) * g.OH + oh) * g.OW + ow] *
                 w[((o * cg + cc) * g.KH + kh) * g.KW + kw];
        }
      }
    }
    dx[i] = acc;
  }
}

// dw[o, c, kh, kw] = sum over n, oh, ow of g[n, o, oh, ow] * x[n, c, oh*sh - ph + kh*dh, ow*sw - pw
// + kw*dw].
__global__ void __launch_bounds__(kThreads)
    conv2d_backward_weight_kernel(float* dw, const float* x, const float* gy, const ConvGeom g) {
  __shared__ float part[kThreads];
  const int64_t cg = g.C / g.groups, og = g.O / g.groups;
  const int lid = static_cast<int>(threadIdx.x);
  const int64_t total = g.O * cg * g.KH * g.KW, per = g.N * g.OH * g.OW;
  for (int64_t e = blockIdx.x; e < total; e += gridDim.x) {
    const int64_t kw = e % g.KW, kh = (e / g.KW) % g.KH, cc = (e / (g.KW * g.KH)) % cg;
    const int64_t o = e / (g.KW * g.KH * cg);
    const int64_t c = (o / og) * cg + cc;
    float acc = 0.f;
    for (int64_t j = lid; j < per; j += kThreads) {
      const int64_t ow = j % g.OW, oh = (j / g.OW) % g.OH, n = j / (g.OW * g.OH);
      const int64_t h = oh * g.sh + kh * g.dh - g.ph;
      const int64_t ww = ow * g.sw + kw * g.dw - g.pw;
      if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) continue;
      acc += gy[((n * g.O + o) * g.OH + oh) * g.OW + ow] * x[((n * g.C + c) * g.H + h) * g.W + ww];
    }
    part[lid] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (lid < s) part[lid] += part[lid + s];
      __syncthreads();
    }
    if (lid == 0) dw[e] = part[0];
    __syncthreads();
  }
}

}  // namespace

void conv2d(float* y, const float* x, const float* w, const float* bias, const ConvGeom& g,
            cudaStream_t stream) {
  const int64_t n = g.N * g.O * g.OH * g.OW;
  if (n <= 0) return;
  conv2d_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, w, bias, g);
  check(cudaGetLastError(), "conv2d kernel");
}

void conv2d_backward_input(float* dx, const float* gy, const float* w, const ConvGeom& g,
                           cudaStream_t stream) {
  const int64_t n = g.N * g.C * g.H * g.W;
  if (n <= 0) return;
  conv2d_backward_input_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dx, gy, w, g);
  check(cudaGetLastError(), "conv2d_backward_input kernel");
}

void conv2d_backward_weight(float* dw, const float* x, const float* gy, const ConvGeom& g,
                            cudaStream_t stream) {
  const int64_t n = g.O * (g.C / g.groups) * g.KH * g.KW;
  if (n <= 0) return;
  conv2d_backward_weight_kernel<<<blocks_per_item(n), kThreads, 0, stream>>>(dw, x, gy, g);
  check(cudaGetLastError(), "conv2d_backward_weight kernel");
}

}  // namespace mls::cuda::dev
