#include "engine/core/value.h"

namespace mls {

std::string type_str(const ValueType& t) {
  return std::string(dtype_name(t.dtype)) + shape_str(t.shape);
}

}  // namespace mls
