// CPU kernels: max and average pooling and their gradients (registered by
// register_conv_kernels). Work splits by (sample, channel) plane: every write of a kernel
// stays inside its plane.
#include <algorithm>

#include "engine/cpu/kernels.h"
#include "engine/ops/conv.h"

namespace mls::cpu {

namespace {

struct PoolShape {
  int64_t planes, h, w, oh, ow;
  Pool2dParams p;
};

PoolShape pool_shape(const Shape& x, const Shape& y, const Attrs& a) {
  return {x[0] * x[1], x[2], x[3], y[2], y[3], pool2d_params(a).value()};
}

// A window clipped to the input: rows [h0, h1), columns [w0, w1) of its plane.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t cells() const { return (h1 - h0) * (w1 - w0); }
};

// fn(plane, out, window) for every pooled element `out` (flat within its plane).
template <typename Fn>
void for_windows(const KernelCall& c, const PoolShape& s, Fn fn) {
  int64_t per_plane = std::max<int64_t>(1, s.oh * s.ow * s.p.kernel[0] * s.p.kernel[1]);
  pool_of(c).parallel_for(
      0, s.planes, std::max<int64_t>(1, kParallelGrain / per_plane), [&](int64_t lo, int64_t hi) {
        for (int64_t plane = lo; plane < hi; ++plane)
          for (int64_t oh = 0; oh < s.oh; ++oh) {
            int64_t h0 = oh * s.p.stride[0] - s.p.padding[0];
            for (int64_t ow = 0; ow < s.ow; ++ow) {
              int64_t w0 = ow * s.p.stride[1] - s.p.padding[1];
              Window win{std::max<int64_t>(h0, 0), std::min(h0 + s.p.kernel[0], s.h),
                         std::max<int64_t>(w0, 0), std::min(w0 + s.p.kernel[1], s.w)};
              fn(plane, oh * s.ow + ow, win);
            }
          }
      });
}

// The offset in its plane of a window's largest element (the first one on ties).
int64_t argmax(const float* plane, int64_t width, const Window& win) {
  int64_t best = win.h0 * width + win.w0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw)
      if (plane[ih * width + iw] > plane[best]) best = ih * width + iw;
  return best;
}

// 2x2 windows with stride 2 and no padding that tile the plane exactly (LeNet's, VGG's):
// fixed loops the compiler unrolls, and the backward pass writes every cell once.
bool tiled_2x2(const PoolShape& s) {
  return s.p.kernel[0] == 2 && s.p.kernel[1] == 2 && s.p.stride[0] == 2 && s.p.stride[1] == 2 &&
         s.p.padding[0] == 0 && s.p.padding[1] == 0 && s.h == 2 * s.oh && s.w == 2 * s.ow;
}

// Index (0..3) of the largest of a 2x2 block, the first on ties (row-major, as argmax()).
inline int which_max(float a, float b, float c, float d) {
  int i = 0;
  float m = a;
  if (b > m) { m = b; i = 1; }
  if (c > m) { m = c; i = 2; }
  if (d > m) i = 3;
  return i;
}

template <typename Fn>
void for_planes_2x2(const KernelCall& c, const PoolShape& s, Fn fn) {
  pool_of(c).parallel_for(0, s.planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s.h * s.w, 1)),
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t plane = lo; plane < hi; ++plane) fn(plane);
                          });
}

void max_pool2d_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[0]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  if (tiled_2x2(s)) {
    for_planes_2x2(c, s, [&](int64_t plane) {
      const float* xp = x + plane * s.h * s.w;
      float* yp = y + plane * s.oh * s.ow;
      for (int64_t oh = 0; oh < s.oh; ++oh) {
        const float* r0 = xp + 2 * oh * s.w;
        const float* r1 = r0 + s.w;
        for (int64_t ow = 0; ow < s.ow; ++ow)
          yp[oh * s.ow + ow] = std::max(std::max(r0[2 * ow], r0[2 * ow + 1]), std::max(r1[2 * ow], r1[2 * ow + 1]));
      }
    });
    return;
  }
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    const float* xp = x + plane * s.h * s.w;
    y[plane * s.oh * s.ow + out] = xp[argmax(xp, s.w, win)];
  });
}

// (g, x) -> dx: g added at each window's argmax.
void max_pool2d_backward_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[1]->shape(), c.inputs[0]->shape(), c.attrs);
  const float* g = in_ptr<float>(c, 0);
  const float* x = in_ptr<float>(c, 1);
  float* dx = out_ptr<float>(c, 0);
  if (tiled_2x2(s)) {
    for_planes_2x2(c, s, [&](int64_t plane) {
      const float* xp = x + plane * s.h * s.w;
      const float* gp = g + plane * s.oh * s.ow;
      float* dp = dx + plane * s.h * s.w;
      for (int64_t oh = 0; oh < s.oh; ++oh) {
        const float* r0 = xp + 2 * oh * s.w;
        const float* r1 = r0 + s.w;
        float* d0 = dp + 2 * oh * s.w;
        float* d1 = d0 + s.w;
        for (int64_t ow = 0; ow < s.ow; ++ow) {
          int64_t j = 2 * ow;
          int k = which_max(r0[j], r0[j + 1], r1[j], r1[j + 1]);
          float gv = gp[oh * s.ow + ow];
          d0[j] = k == 0 ? gv : 0.f;
          d0[j + 1] = k == 1 ? gv : 0.f;
          d1[j] = k == 2 ? gv : 0.f;
          d1[j + 1] = k == 3 ? gv : 0.f;
        }
      }
    });
    return;
  }
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    int64_t base = plane * s.h * s.w;
    if (out == 0) std::fill(dx + base, dx + base + s.h * s.w, 0.f);
    dx[base + argmax(x + base, s.w, win)] += g[plane * s.oh * s.ow + out];
  });
}

// (t, x) -> y: t at each window's argmax.
void max_pool2d_gather_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[1]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* t = in_ptr<float>(c, 0);
  const float* x = in_ptr<float>(c, 1);
  float* y = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    int64_t base = plane * s.h * s.w;
    y[plane * s.oh * s.ow + out] = t[base + argmax(x + base, s.w, win)];
  });
}

float divisor(const PoolShape& s, const Window& win) {
  return static_cast<float>(s.p.count_include_pad ? s.p.kernel[0] * s.p.kernel[1] : win.cells());
}

void avg_pool2d_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[0]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    const float* xp = x + plane * s.h * s.w;
    float sum = 0.f;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * s.w + iw];
    y[plane * s.oh * s.ow + out] = sum / divisor(s, win);
  });
}

// (g) -> dx: each window's g spread evenly over it.
void avg_pool2d_backward_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.outputs[0]->shape(), c.inputs[0]->shape(), c.attrs);
  const float* g = in_ptr<float>(c, 0);
  float* dx = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    float* dp = dx + plane * s.h * s.w;
    if (out == 0) std::fill(dp, dp + s.h * s.w, 0.f);
    float v = g[plane * s.oh * s.ow + out] / divisor(s, win);
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) dp[ih * s.w + iw] += v;
  });
}

}  // namespace

void register_pool_kernels(OpRegistry& reg) {
  reg.register_kernel("max_pool2d", DeviceKind::CPU, DType::F32, max_pool2d_kernel);
  reg.register_kernel("max_pool2d_backward", DeviceKind::CPU, DType::F32,
                      max_pool2d_backward_kernel);
  reg.register_kernel("max_pool2d_gather", DeviceKind::CPU, DType::F32, max_pool2d_gather_kernel);
  reg.register_kernel("avg_pool2d", DeviceKind::CPU, DType::F32, avg_pool2d_kernel);
  reg.register_kernel("avg_pool2d_backward", DeviceKind::CPU, DType::F32,
                      avg_pool2d_backward_kernel);
}

}  // namespace mls::cpu
