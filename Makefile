# mlstudio — two commands do everything on a fresh Debian machine:
#   make run    set up, build, and train the bundled example headless
#   make test   set up, build, and run every test (CTest summary at the end)
#   make gui    the editor on the MLP example
#   make fuzz   every parser's fuzzer for 10 minutes; make sanitize: the ASan/UBSan/TSan runs
BUILD ?= build
JOBS  ?= $(shell nproc)
EXAMPLE ?= resources/examples/fashion-mnist-mlp.mls

.PHONY: all setup configure build build-app run gui test sanitize fuzz bench clean

all: build

setup:
	@scripts/timed setup scripts/setup

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@scripts/timed build cmake --build $(BUILD) -j $(JOBS)

# Only what `make run` and `make gui` run: the mlstudio executable, not the tests.
build-app: configure
	@cmake --build $(BUILD) -j $(JOBS) --target mlstudio

run: build-app
	$(BUILD)/app/mlstudio --run $(EXAMPLE)

# The editor: opens the MLP example in the main window (needs a display).
gui: build-app
	$(BUILD)/app/mlstudio $(EXAMPLE)

# The GUI tests need an X display: one Xvfb serves the whole run. Then the unit tests under
# AddressSanitizer + UBSan and the threaded ones under ThreadSanitizer (build-asan/,
# build-tsan/), and every parser's fuzzer over a fixed set of inputs (from build-asan/ too).
# The Vulkan tests run on Mesa's lavapipe under the validation layer, and must find it.
# build-asan serves three steps (the unit tests, the fuzzers, the monkey): one build of all
# their targets first, so that ninja overlaps one step's last links with the next one's
# compiling (three builds in turn left a core idle at the end of each); the scripts' own
# builds then find nothing left to do.
ASAN_TARGETS = engine_tests datasets_tests nodes_tests store_tests scripting_tests monkey_tests \
  fuzz_mls fuzz_idx fuzz_csv fuzz_npy fuzz_image fuzz_checkpoint fuzz_lua
# Then the GUI monkey (about 1.2 cores for a minute or more) runs beside TSan's tests (about one
# core for 30 s) and the fuzz check, its output held until it ends: measured here, the three
# took 92 s side by side and 122 s one after another. MLS_ASAN_BUILT=1: the scripts leave
# build-asan as it is (no two cmake runs in it at once).
test: build
	@cd $(BUILD) && MLS_REQUIRE_DEVICES=vulkan MLS_VULKAN_VALIDATION=1 $(CURDIR)/scripts/timed \
	  "main suite" xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" ctest --output-on-failure -j $(JOBS)
	@scripts/configure-asan && scripts/timed "asan build" cmake --build build-asan -j $(JOBS) --target $(ASAN_TARGETS)
	@scripts/timed "asan tests" scripts/sanitize asan
	@scripts/timed "tsan build" scripts/sanitize tsan-build
	@export MLS_ASAN_BUILT=1; scripts/monkey 2000 24 >build-asan/monkey.out 2>&1 & monkey=$$!; \
	  scripts/timed "tsan tests + fuzz check" bash -c 'scripts/sanitize tsan-run && scripts/fuzz check'; rc=$$?; \
	  wait $$monkey; m=$$?; cat build-asan/monkey.out; \
	  if [ $$m -ne 0 ]; then echo "scripts/monkey 2000 24 failed (exit $$m): build-asan/monkey.out"; fi; \
	  [ $$rc -eq 0 ] && [ $$m -eq 0 ]

sanitize: setup
	@scripts/sanitize

# Every fuzz target for 10 minutes (FUZZ_SECONDS to change it), then the GUI monkey under
# ASan for as long (MONKEY_SEED to change its seed).
FUZZ_SECONDS ?= 600
MONKEY_SEED ?= 1
fuzz: setup
	@scripts/fuzz $(FUZZ_SECONDS)
	@scripts/monkey $(FUZZ_SECONDS)s $(MONKEY_SEED)

# Side by side with PyTorch on CPU in one run: one epoch of the MLP and of LeNet-5, the
# memory of one training step, batch-1 inference, a tiny eager op; then the FMA peak and
# the engine's GEMM, and how fast the input pipeline delivers Fashion-MNIST batches; then the
# experiment database at scale (10,000 runs: runs list/compare, the run browser, logging);
# what the training debugger costs a step (breakpoints armed, health instruments); data-parallel
# scaling over MPI ranks, one thread each (writes docs/dist-scaling.md); cost curves, time per
# epoch and % of the FMA peak as the MLP, the residual CNN and the batch grow, beside PyTorch
# (bench/cost_curves.py: about 15 minutes; writes docs/cost-curves.md and .png;
# COST_CURVES=--quick: fewer points, written under build/ instead).
COST_CURVES ?=
BENCH_TOOLS = pipeline_throughput fma_peak conv_kernels attention_kernels inference_latency eager_overhead dashboard_overhead matmul_backends runs_store_bench run_browser_paint debugger_overhead
bench: build
	@scripts/setup --bench
	@cmake --build $(BUILD) --target $(BENCH_TOOLS)
	@/usr/bin/python3 bench/epoch_vs_torch.py --model mlp --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/epoch_vs_torch.py --model lenet --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/epoch_vs_torch.py --model resnet --epochs 1 --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/epoch_vs_torch.py --model transformer --seed-per-round --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/step_memory.py --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/inference_latency_torch.py --mlstudio $(BUILD)/bench/inference_latency
	@/usr/bin/python3 bench/eager_overhead_torch.py --mlstudio $(BUILD)/bench/eager_overhead
	@/usr/bin/python3 bench/lua_overhead_torch.py --mlstudio $(BUILD)/app/mlstudio
	@$(BUILD)/bench/fma_peak
	@/usr/bin/python3 bench/cost_curves.py --mlstudio $(BUILD)/app/mlstudio --fma-peak $(BUILD)/bench/fma_peak $(COST_CURVES)
	@$(BUILD)/bench/conv_kernels
	@$(BUILD)/bench/attention_kernels
	@$(BUILD)/bench/pipeline_throughput
	@$(BUILD)/bench/matmul_backends
	@$(BUILD)/bench/debugger_overhead
	@/usr/bin/python3 bench/dist_scaling.py --mlstudio $(BUILD)/app/mlstudio
	@xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" $(BUILD)/bench/dashboard_overhead "" 5
	@$(BUILD)/bench/runs_store_bench --mlstudio $(BUILD)/app/mlstudio --db $(BUILD)/runs-bench.db --keep
	@xvfb-run -a -s "-screen 0 1600x1000x24 -noreset" $(BUILD)/bench/run_browser_paint $(BUILD)/runs-bench.db
	@rm -f $(BUILD)/runs-bench.db $(BUILD)/runs-bench.db-wal $(BUILD)/runs-bench.db-shm

clean:
	rm -rf $(BUILD) build-asan build-tsan build-asan-gui
