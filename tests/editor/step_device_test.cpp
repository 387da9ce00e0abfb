// The Training step tab asks the backend registry for the project's device: a Vulkan
// project shows the step as Vulkan compiles it, and a device that does not open says why
// instead of drawing the CPU's step.
#include <string>

#include "engine/core/backend_registry.h"
#include "engine/train/trainer.h"
#include "nodes/lower.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

TEST_CASE("the step view builds the step on the project's device", "[editor][teaching]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  StepView* v = fx.window->stepView();
  fx.window->showStepTab(-1);
  REQUIRE(v->step().has_value());  // on "cpu", as the example says

  // The devices this build registered besides the CPU (init_backends, as the app does): on
  // this machine Vulkan (lavapipe) opens and CUDA is built but finds no GPU.
  int tried = 0;
  for (const char* device : {"vulkan", "cuda"}) {
    if (!backend_registry().has(device)) continue;
    ++tried;
    INFO("device " << device);
    REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"device", device}})).ok());
    REQUIRE(m->doc().training.device == device);
    v->rebuild();
    auto backend = backend_registry().open(device);
    if (backend) {
      // The step the trainer would compile on that backend, pass for pass.
      REQUIRE(v->step().has_value());
      auto model = nodes::lower(m->doc(), *m->dataContext(), m->doc().training.batch_size, true,
                                "step_device_test");
      REQUIRE(model.ok());
      StepOptions o = step_options(nodes::train_config(m->doc().training));
      o.keep_stages = true;
      auto want = build_step(std::move(*model), **backend, o);
      REQUIRE(want.ok());
      REQUIRE(v->step()->stages.size() == want->stages.size());
      for (size_t i = 0; i < want->stages.size(); ++i)
        CHECK(v->step()->stages[i].graph.to_text() == want->stages[i].graph.to_text());
      // The MLP's graph reads the same on every device; where its constants were folded
      // does not: on the device's own kernels, so they live in its memory.
      int folded = 0;
      for (const Value& val : v->step()->graph().values())
        if (val.kind == ValueKind::Const && val.name.rfind("folded", 0) == 0) {
          ++folded;
          CHECK(&val.constant.backend() == *backend);
        }
      CHECK(folded > 0);
    } else {
      // No step at all, rather than the CPU's: the message is the registry's.
      CHECK_FALSE(v->step().has_value());
      CHECK(v->message().startsWith("The step cannot be built: "));
      CHECK(v->message().contains(QString::fromStdString(backend.error().message)));
      CHECK(v->summary() == v->message());
    }
  }
  if (tried == 0) WARN("this build has no GPU backend: only the CPU step was checked");

  // Back on the CPU, the step is drawn again.
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"device", "cpu"}})).ok());
  v->rebuild();
  CHECK(v->step().has_value());
  CHECK(v->drawnNodes() > 0);
}
