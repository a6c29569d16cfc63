# kubewasm: build, test and run. `make help` lists the targets.

CARGO ?= cargo
WASM_TARGET := wasm32-wasip2
TARGET_DIR ?= target
PLUGINS := myapp config-rollout
TEST_PLUGINS := misbehave not-a-plugin
WASM_OUT := $(TARGET_DIR)/$(WASM_TARGET)/plugin

.PHONY: help plugins test-plugins build test lint fmt unit dev bench clean

help:
	@echo "make plugins       build the example plugins into $(TARGET_DIR)/plugins/"
	@echo "make test-plugins  build the test guests into $(TARGET_DIR)/test-plugins/"
	@echo "make test          fmt check, clippy -D warnings, unit, integration and doc tests"
	@echo "make dev           run the main job (see README)"
	@echo "make bench         run the benchmarks and rewrite BENCHMARKS.md"

plugins:
	$(CARGO) build --profile plugin --target $(WASM_TARGET) $(addprefix -p ,$(PLUGINS))
	@mkdir -p $(TARGET_DIR)/plugins
	@for p in $(PLUGINS); do cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm $(TARGET_DIR)/plugins/$$p.wasm; done
	@ls -l $(TARGET_DIR)/plugins

test-plugins:
	$(CARGO) build --profile plugin --target $(WASM_TARGET) $(addprefix -p ,$(TEST_PLUGINS))
	@mkdir -p $(TARGET_DIR)/test-plugins
	@cp $(WASM_OUT)/misbehave.wasm $(TARGET_DIR)/test-plugins/misbehave.wasm
	@cp $(WASM_OUT)/not-a-plugin.wasm $(TARGET_DIR)/test-plugins/not-a-plugin.wasm

build:
	$(CARGO) build --bin kubewasm

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) $(addprefix -p ,$(PLUGINS) $(TEST_PLUGINS)) -- -D warnings

test: lint plugins test-plugins build
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

dev: plugins build
	$(TARGET_DIR)/debug/kubewasm inspect $(TARGET_DIR)/plugins/myapp.wasm
	$(TARGET_DIR)/debug/kubewasm replay $(TARGET_DIR)/plugins/myapp.wasm --objects plugins/myapp/example.yaml --key default/demo

bench: plugins test-plugins
	$(CARGO) bench -p kubewasm-tests --bench contract -- --write BENCHMARKS.md

clean:
	$(CARGO) clean
