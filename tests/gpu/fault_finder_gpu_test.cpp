// The fault finder (engine/train/fault_finder.h) on a GPU backend: the step replays on the
// device's kernels, the test-only probe (no GPU kernel) on the host as eager falls back, and
// the NaN it writes is still named at its node.
#include "tests/engine/fault_test_ops.h"
#include "tests/gpu/gpu_test_util.h"

using namespace mls;
using namespace mls::test;

TEST_CASE("a NaN written in forward is named at its node on Vulkan", "[fault][vulkan]") {
  Backend* vk = open_or_skip("vulkan");
  if (!vk) return;
  check_forward_probe(*vk);
}
