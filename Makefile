# mlstudio — two commands do everything on a fresh Debian machine:
#   make run    set up, build, and train the bundled example headless
#   make test   set up, build, and run every test (CTest summary at the end)
BUILD ?= build
JOBS  ?= $(shell nproc)
EXAMPLE ?= resources/examples/fashion-mnist-mlp.mls

.PHONY: all setup configure build run test bench clean

all: build

setup:
	@scripts/setup

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/app/mlstudio --run $(EXAMPLE)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# One epoch of the MLP and of LeNet-5 beside PyTorch on CPU, same data, batch and threads;
# then how fast the input pipeline delivers Fashion-MNIST batches.
bench: build
	@scripts/setup --bench
	@cmake --build $(BUILD) --target pipeline_throughput
	@$(BUILD)/bench/pipeline_throughput
	@/usr/bin/python3 bench/epoch_vs_torch.py --model mlp --mlstudio $(BUILD)/app/mlstudio
	@/usr/bin/python3 bench/epoch_vs_torch.py --model lenet --mlstudio $(BUILD)/app/mlstudio

clean:
	rm -rf $(BUILD)
