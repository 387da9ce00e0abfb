// Value handles shared by the static graph and the eager session. In core, not ir: an op's
// definition (engine/core/op.h) infers ValueTypes, and core must not include ir.
//
//   Ref x = g.add_input("x", {DType::F32, {128, 784}});
//   ValueType t = g.type_of(x);         // f32[128,784]
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"

namespace mls {

// A value in an Emitter's space: an SSA value of a Graph, or a tensor of an eager session.
struct Ref {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const Ref&) const = default;
  auto operator<=>(const Ref&) const = default;
};

struct ValueType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const ValueType&) const = default;
};

std::string type_str(const ValueType& t);  // "f32[128,784]"

}  // namespace mls
