// The text of a tensor, as PyTorch prints one: one number format for every element (4
// decimals, or scientific where the magnitudes call for it), rows aligned, axes longer than
// 6 summarised with "..." once the tensor has more than 1000 elements.
#include <cmath>
#include <cstdio>

#include "scripting/libs.h"

namespace mls::lua {

ElementFormat element_format(DType dtype, const std::vector<double>& v) {
  ElementFormat f;
  f.dtype = dtype;
  f.ints = dtype == DType::I64 || dtype == DType::I32 || dtype == DType::U8 || dtype == DType::I8 ||
           dtype == DType::Bool;
  // One format for every element, as PyTorch: fixed with 4 decimals unless the magnitudes
  // call for scientific notation.
  double amax = 0, amin_nz = HUGE_VAL;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    amax = std::max(amax, std::fabs(x));
    if (x != 0) amin_nz = std::min(amin_nz, std::fabs(x));
  }
  f.sci = !f.ints && (amax >= 1e8 || (amin_nz < 1e-4 && amin_nz != HUGE_VAL));
  return f;
}

std::string ElementFormat::operator()(double x) const {
  char b[48];
  if (dtype == DType::Bool)
    std::snprintf(b, sizeof b, "%s", x != 0 ? "true" : "false");
  else if (ints)
    std::snprintf(b, sizeof b, "%lld", static_cast<long long>(x));
  else if (sci)
    std::snprintf(b, sizeof b, "%.4e", x);
  else
    std::snprintf(b, sizeof b, "%.4f", x);
  return b;
}

std::string tensor_repr(const Tensor& t, bool requires_grad) {
  const Shape& s = t.shape();
  const std::vector<double> v = t.to_f64();
  const bool summarise = v.size() > 1000;
  const ElementFormat fmt = element_format(t.dtype(), v);
  size_t width = 0;
  for (double x : v) width = std::max(width, fmt(x).size());
  std::string out = "tensor(";
  const std::string indent(7, ' ');
  std::vector<int64_t> stride(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) stride[i - 1] = stride[i] * s[i];
  // Recursive printer over axes; summarised axes show 3 entries at each end.
  auto rec = [&](auto&& self, size_t axis, int64_t offset) -> void {
    if (axis == s.size()) {
      std::string e = fmt(v[static_cast<size_t>(offset)]);
      out += std::string(width - e.size(), ' ') + e;
      return;
    }
    out += "[";
    const int64_t n = s[axis];
    for (int64_t i = 0; i < n; ++i) {
      if (summarise && n > 6 && i == 3) {
        out += axis + 1 == s.size() ? "..., " : "...,\n" + indent + std::string(axis + 1, ' ');
        i = n - 4;
        continue;
      }
      self(self, axis + 1, offset + i * stride[axis]);
      if (i + 1 < n) {
        if (axis + 1 == s.size())
          out += ", ";
        else
          out += "," + std::string(s.size() - axis - 1, '\n') + indent + std::string(axis + 1, ' ');
      }
    }
    out += "]";
  };
  if (s.empty())
    out += fmt(v.empty() ? 0.0 : v[0]);
  else
    rec(rec, 0, 0);
  if (summarise || numel(s) == 0) out += ", shape=" + shape_str(s);
  if (t.dtype() != DType::F32) out += ", dtype=" + std::string(dtype_name(t.dtype()));
  if (requires_grad) out += ", requires_grad=true";
  return out + ")";
}

}  // namespace mls::lua
