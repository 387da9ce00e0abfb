// The memory planner: hand-computed minima, and no overlap between live buffers.
#include "engine/exec/compiled_plan.h"
#include "engine/exec/memory_plan.h"
#include "engine/ir/graph.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

void require_no_overlap(std::span<const BufferRequest> reqs, const MemoryPlan& p) {
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      bool live_together = reqs[i].first <= reqs[j].last && reqs[j].first <= reqs[i].last;
      if (!live_together) continue;
      bool disjoint = p.offsets[i] + reqs[i].bytes <= p.offsets[j] || p.offsets[j] + reqs[j].bytes <= p.offsets[i];
      INFO("buffers " << i << " and " << j);
      REQUIRE(disjoint);
    }
}

}  // namespace

TEST_CASE("a chain needs two buffers at a time: peak = the largest adjacent pair", "[memory]") {
  std::vector<BufferRequest> reqs{{100, 0, 1}, {200, 1, 2}, {100, 2, 3}, {50, 3, 3}};
  MemoryPlan p = plan_memory(reqs, 1);
  CHECK(p.peak_bytes == 300);  // max(100+200, 200+100, 100+50)
  CHECK(p.sum_bytes == 450);
  require_no_overlap(reqs, p);
}

TEST_CASE("a diamond: a value read late stays live across both branches", "[memory]") {
  // step0: A; step1: B = f(A); step2: C = g(A); step3: D = B + C.
  std::vector<BufferRequest> reqs{{64, 0, 2}, {128, 1, 3}, {128, 2, 3}, {64, 3, 3}};
  MemoryPlan p = plan_memory(reqs, 64);
  // At step 2, A, B and C are live (320); at step 3, B, C, D (320).
  CHECK(p.peak_bytes == 320);
  require_no_overlap(reqs, p);
}

TEST_CASE("alignment rounds every buffer up", "[memory]") {
  std::vector<BufferRequest> reqs{{1, 0, 0}, {65, 1, 1}};
  MemoryPlan p = plan_memory(reqs, 64);
  CHECK(p.peak_bytes == 128);
  CHECK(p.offsets[1] % 64 == 0);
}

TEST_CASE("small buffers with their own alignment pack tightly and large ones stay aligned", "[memory]") {
  // A 4-byte loss and a 40-byte bias gradient live beside two 1000-byte buffers: at 64-byte
  // alignment they would cost 128 bytes, at their own 4 only 44.
  std::vector<BufferRequest> reqs{{4, 0, 2, 4}, {40, 0, 2, 4}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryPlan p = plan_memory(reqs, 64);
  require_no_overlap(reqs, p);
  CHECK(p.offsets[0] % 4 == 0);
  CHECK(p.offsets[1] % 4 == 0);
  CHECK(p.offsets[2] % 64 == 0);
  CHECK(p.offsets[3] % 64 == 0);
  // Step 2 holds all four: the two large ones (1024 each, at 64-byte granules), then the small
  // ones right after them, 44 bytes with no padding.
  CHECK(p.peak_bytes == 2 * 1024 + 44);
  CHECK(p.sum_bytes == 4 + 40 + 2 * 1024);
}

TEST_CASE("random interval sets with mixed alignments: every offset aligned, no overlap", "[memory]") {
  Rng rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<BufferRequest> reqs;
    const int steps = 1 + static_cast<int>(rng.below(12));
    const size_t count = 1 + rng.below(25);
    for (size_t i = 0; i < count; ++i) {
      auto first = static_cast<int32_t>(rng.below(static_cast<uint64_t>(steps)));
      auto last = first + static_cast<int32_t>(rng.below(static_cast<uint64_t>(steps - first)));
      const bool small = rng.below(2) == 0;
      const size_t align = small ? size_t{1} << rng.below(4) : 0;  // 1, 2, 4, 8 or the plan's 64
      reqs.push_back({small ? 1 + rng.below(63) : 64 + rng.below(500), first, last, align});
    }
    MemoryPlan p = plan_memory(reqs, 64);
    require_no_overlap(reqs, p);
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("buffer " << i);
      CHECK(p.offsets[i] % (reqs[i].align ? reqs[i].align : 64) == 0);
      CHECK(p.offsets[i] + reqs[i].bytes <= p.peak_bytes);
    }
  }
}

TEST_CASE("random interval sets: no overlap, and the peak lies between the bounds", "[memory]") {
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> reqs;
    int steps = 1 + static_cast<int>(rng.below(20));
    size_t count = 1 + rng.below(30);
    for (size_t i = 0; i < count; ++i) {
      auto first = static_cast<int32_t>(rng.below(static_cast<uint64_t>(steps)));
      auto last = first + static_cast<int32_t>(rng.below(static_cast<uint64_t>(steps - first)));
      reqs.push_back({64 * (1 + rng.below(8)), first, last});
    }
    MemoryPlan p = plan_memory(reqs, 64);
    require_no_overlap(reqs, p);
    size_t live_max = 0;
    for (int s = 0; s < steps; ++s) {
      size_t live = 0;
      for (auto& r : reqs)
        if (r.first <= s && s <= r.last) live += r.bytes;
      live_max = std::max(live_max, live);
    }
    CHECK(p.peak_bytes >= live_max);
    CHECK(p.peak_bytes <= p.sum_bytes);
  }
}

TEST_CASE("a compiled chain of four ops plans two buffers, views cost nothing", "[memory][plan]") {
  Graph g("chain");
  Ref x = g.add_input("x", {DType::F32, {16, 16}});  // 1024 bytes per value
  Ref a = exp(g, x);
  Ref b = exp(g, a);
  Ref r = reshape(g, b, {256});  // a view of b
  Ref c = g.emit1("tanh", {r});
  Ref d = neg(g, c);
  g.set_outputs({d});
  // Without in-place reuse: two buffers at a time. With it: each op overwrites its input
  // (through the view too), so one buffer holds the whole chain.
  for (bool inplace : {false, true}) {
    INFO("in place: " << inplace);
    PlanOptions opt;
    opt.inplace = inplace;
    auto plan = CompiledPlan::compile(g, host(), opt);
    REQUIRE(plan.ok());
    CHECK(plan->stats().scheduled_nodes == 5);
    CHECK(plan->stats().arena_bytes == (inplace ? 1024u : 2048u));  // hand minima
    CHECK(plan->stats().unplanned_bytes == 4096);
    CHECK(plan->stats().inplace_steps == (inplace ? 3u : 0u));
    std::vector<float> xv(256, 0.5f);
    REQUIRE(plan->bind(x, Tensor::from_f32(host(), {16, 16}, xv)).ok());
    plan->run();
    CHECK(plan->stats().skipped_views == 1);
    double want = -std::tanh(std::exp(std::exp(0.5)));
    CHECK(plan->tensor(d).to_f64()[7] == Approx(want).epsilon(1e-6));
    // No two arena values live in the same wave overlap, but for a value written in place
    // over the input whose last reader it is.
    const auto& pl = plan->placements();
    for (size_t i = 0; i < pl.size(); ++i)
      for (size_t j = i + 1; j < pl.size(); ++j) {
        if (pl[j].inplace_of == pl[i].value && pl[i].last == pl[j].first && pl[i].offset == pl[j].offset) continue;
        if (pl[i].first <= pl[j].last && pl[j].first <= pl[i].last)
          CHECK((pl[i].offset + pl[i].bytes <= pl[j].offset || pl[j].offset + pl[j].bytes <= pl[i].offset));
      }
  }
}

TEST_CASE("dead code is not scheduled", "[plan]") {
  Graph g("dce");
  Ref x = g.add_input("x", {DType::F32, {4}});
  Ref used = exp(g, x);
  (void)neg(g, x);  // dead
  (void)exp(g, used);  // dead
  g.set_outputs({used});
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  CHECK(plan->stats().scheduled_nodes == 1);
}
