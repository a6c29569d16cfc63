# kubewasm: build, test and run. `make help` lists the targets.

CARGO ?= cargo
PYTHON ?= python3
WASM_TARGET := wasm32-wasip2
TARGET_DIR ?= target
WASM_OUT := $(TARGET_DIR)/$(WASM_TARGET)/plugin
OUT := $(TARGET_DIR)/plugins
TEST_OUT := $(TARGET_DIR)/test-plugins
SDK_OUT := $(TARGET_DIR)/sdk
PY_WHEEL := $(SDK_OUT)/kubewasm_guest-0.3.0-py3-none-any.whl
NPM_TARBALL := $(SDK_OUT)/kubewasm-guest-0.3.0.tgz

TIMED := .ci/timed
SUBMAKE := $(MAKE) --no-print-directory

RUST_PLUGINS := myapp config-rollout
# Go plugins (their directory and component): a core module built for
# wasip1, made a component by the kubewasm binary (`kubewasm componentize`).
# `myapp-go` runs the MyApps `myapp` runs: a test component, kept out of the
# directory `make dev` runs.
GO_COMPONENTS := plugins/cronjob-go:$(OUT)/cronjob.wasm plugins/myapp-go:$(TEST_OUT)/myapp-go.wasm \
	tests/guests/misbehave-go:$(TEST_OUT)/misbehave-go.wasm
GO_PLUGIN_DIRS := $(foreach c,$(GO_COMPONENTS),$(firstword $(subst :, ,$(c))))
GO_BUILD := GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-checklinkname=0 -s -w' 
RUST_TEST_PLUGINS := misbehave not-a-plugin evil-import liar selective snoop propagate composite reader reporter
WIT := $(wildcard wit/*.wit)
PY_SDK := $(wildcard guest-sdk/python/kubewasm_guest/*.py)
JS_SDK := $(wildcard guest-sdk/js/src/*.js) guest-sdk/js/bin/componentize.js
NPM_STAMP := node_modules/.package-lock.json
COMPONENTIZE_PY := componentize-py -d wit -w controller componentize
COMPONENTIZE_JS := node_modules/.bin/kubewasm-componentize

.PHONY: help stress setup plugins test-plugins rust-plugins rust-test-plugins build test-build go-plugins sdk publish-sdk test lint format-check go-vet guest-tests new-project-tests fmt dev bench soak fuzz real-cluster deps-check test-real kubernetes-version difference kube-rs-tests manifests image clean

help:
	@echo "make setup         install the wasm target, componentize-py and the npm toolchain (make dev and make test do it)"
	@echo "make plugins       build every example plugin (Rust, Python, JavaScript) into $(OUT)/, with their CRDs"
	@echo "make test-plugins  build the test guests into $(TEST_OUT)/"
	@echo "make go-plugins    build the Go plugins and test guests (after make build: kubewasm componentize makes the components)"
	@echo "make sdk           the Python wheel and the npm tarball of the guest SDK, into $(SDK_OUT)/ (kubewasm new uses them)"
	@echo "make test          fmt checks, the build linted by clippy -D warnings, unit, integration, doc and guest-language tests, new projects, make test-real, go vet"
	@echo "make lint          rustfmt and gofmt checks, cargo clippy -D warnings (host and wasm crates), go vet"
	@echo "make test-build    the kubewasm binary and every test, built once with the tests' features (make test does it)"
	@echo "make dev           the main job: the embedded API server and the host running the example plugins"
	@echo "make kube-rs-tests kube-rs 5.0's own cluster tests against the embedded API server (not in CI)"
	@echo "make manifests     deploy/host.yaml and deploy/sharded.yaml rendered from the Helm chart (deploy/chart/kubewasm)"
	@echo "make image         the host's image (no engine, no base image) in target/image; IMAGE=HOST/REPO:TAG pushes it"
	@echo "make bench         run the benchmarks and rewrite their sections of BENCHMARKS.md"
	@echo "make soak          ten plugins, 10,000 primaries, 10 minutes against the faulty server; figures into BENCHMARKS.md"
	@echo "make test-real     the host's suites against a real control plane (CI=true: their reduced form)"
	@echo "make real-cluster  a real control plane on loopback (Kubernetes, etcd, kwok Nodes; built from Go modules), until Ctrl-C;"
	@echo "                   REAL_NODES=1 adds a real node (containerd, runc, kubelet, kube-proxy; root), NODES=N the kwok ones"
	@echo "make kubernetes-version  all that derives from the pinned Kubernetes (recorded from a fresh make real-cluster)"
	@echo "make difference    the same request sequences to the embedded server and a real one; the table and the figure"
	@echo "make stress        every unit test and suite, 10 rounds of two copies side by side (STRESS=... narrows)"
	@echo "make deps-check    the sandbox's, TLS's and HTTP's crates behind their lines' patch releases (a report)"
	@echo "make fuzz          every fuzz target for FUZZ_SECONDS (60) each (fuzz/run; coverage-guided, libFuzzer)"

setup:
	.ci/setup

plugins: rust-plugins $(OUT)/tenant-bootstrap.wasm $(OUT)/configmap-replicator.wasm
	@cp plugins/myapp/crd.yaml $(OUT)/myapp.crd.yaml  # kubewasm dev installs the CRDs beside the plugins
	@cp plugins/myapp/demo.yaml $(OUT)/myapp.demo.yaml  # and prints what to try from NAME.demo.yaml
	@ls -l $(OUT)

test-plugins: rust-test-plugins $(TEST_OUT)/misbehave-py.wasm $(TEST_OUT)/misbehave-js.wasm $(TEST_OUT)/liar-py.wasm

rust-plugins:
	$(CARGO) build --profile plugin --target $(WASM_TARGET) $(addprefix -p ,$(RUST_PLUGINS))
	@mkdir -p $(OUT)
	@for p in $(RUST_PLUGINS); do cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm $(OUT)/$$p.wasm; done  # libraries: dashes become underscores

# After `build` or `test-build` (their kubewasm binary componentizes).
go-plugins:
	@test -x $(TARGET_DIR)/debug/kubewasm || { echo "make go-plugins: no $(TARGET_DIR)/debug/kubewasm: make build first" >&2; exit 1; }
	@mkdir -p $(OUT) $(TEST_OUT) $(TARGET_DIR)/go
	@cp plugins/cronjob-go/crd.yaml $(OUT)/cronjob.crd.yaml  # kubewasm dev installs it
	@cp plugins/cronjob-go/demo.yaml $(OUT)/cronjob.demo.yaml  # and prints what to try
	@for c in $(GO_COMPONENTS); do \
	  dir=$${c%%:*}; out=$${c#*:}; core=$(abspath $(TARGET_DIR))/go/$$(basename $$dir).core.wasm; \
	  echo "$(GO_BUILD) in $$dir, then kubewasm componentize"; \
	  (cd $$dir && $(GO_BUILD) -o $$core .) && $(TARGET_DIR)/debug/kubewasm componentize $$core -o $$out || exit 1; \
	done

rust-test-plugins:
	$(CARGO) build --profile plugin --target $(WASM_TARGET) $(addprefix -p ,$(RUST_TEST_PLUGINS))
	@mkdir -p $(TEST_OUT)
	@cp $(WASM_OUT)/misbehave.wasm $(TEST_OUT)/misbehave.wasm
	@cp $(WASM_OUT)/liar.wasm $(TEST_OUT)/liar.wasm
	@cp $(WASM_OUT)/selective.wasm $(TEST_OUT)/selective.wasm
	@cp $(WASM_OUT)/snoop.wasm $(TEST_OUT)/snoop.wasm
	@cp $(WASM_OUT)/propagate.wasm $(TEST_OUT)/propagate.wasm
	@cp $(WASM_OUT)/composite.wasm $(TEST_OUT)/composite.wasm
	@cp $(WASM_OUT)/reader.wasm $(TEST_OUT)/reader.wasm
	@cp $(WASM_OUT)/reporter.wasm $(TEST_OUT)/reporter.wasm
	@cp $(WASM_OUT)/evil_import.wasm $(TEST_OUT)/evil-import.wasm
	@cp $(WASM_OUT)/not-a-plugin.wasm $(TEST_OUT)/not-a-plugin.wasm  # a binary keeps its dashes
	@# Its own workspace: built against Kubernetes 1.33's types (k8s-openapi takes one release a build).
	RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=$(CLIPPY_DENY_WARNINGS) $(CARGO) build --locked \
		--manifest-path tests/guests/kubernetes-1-33/Cargo.toml --profile plugin --target $(WASM_TARGET) --target-dir $(TARGET_DIR)
	@cp $(WASM_OUT)/kubernetes_1_33.wasm $(TEST_OUT)/kubernetes-1-33.wasm

$(NPM_STAMP): package.json package-lock.json guest-sdk/js/package.json plugins/configmap-replicator/package.json
	npm ci --no-audit --no-fund

$(OUT)/tenant-bootstrap.wasm: $(wildcard plugins/tenant-bootstrap/*.py) $(PY_SDK) $(WIT)
	@mkdir -p $(OUT)
	$(COMPONENTIZE_PY) app -p plugins/tenant-bootstrap -p guest-sdk/python -o $@

$(OUT)/configmap-replicator.wasm: $(wildcard plugins/configmap-replicator/*.js) $(JS_SDK) $(WIT) $(NPM_STAMP)
	@mkdir -p $(OUT)
	$(COMPONENTIZE_JS) plugins/configmap-replicator/app.js --wit wit --out $@

$(TEST_OUT)/misbehave-py.wasm: $(wildcard tests/guests/misbehave-py/*.py) $(PY_SDK) $(WIT)
	@mkdir -p $(TEST_OUT)
	$(COMPONENTIZE_PY) misbehave -p tests/guests/misbehave-py -p guest-sdk/python -o $@

$(TEST_OUT)/liar-py.wasm: $(wildcard tests/guests/liar-py/*.py) $(PY_SDK) $(WIT)
	@mkdir -p $(TEST_OUT)
	$(COMPONENTIZE_PY) liar -p tests/guests/liar-py -p guest-sdk/python -o $@

$(TEST_OUT)/misbehave-js.wasm: $(wildcard tests/guests/misbehave-js/*.js) $(JS_SDK) $(WIT) $(NPM_STAMP)
	@mkdir -p $(TEST_OUT)
	$(COMPONENTIZE_JS) tests/guests/misbehave-js/app.js --wit wit --out $@

build:
	$(CARGO) build --bin kubewasm

# Every test and the kubewasm binary, with the features the tests unify (a
# `cargo build --bin kubewasm` first would build tokio and all above it twice).
test-build:
	$(CARGO) build --workspace --all-targets

# The SDK packages, each staged with the contract's WIT inside (the build
# commands of new projects use it). `make publish-sdk` publishes them (PyPI
# and npm credentials needed; not reachable from this project's CI).
sdk: $(PY_WHEEL) $(NPM_TARBALL)

publish-sdk: sdk
	$(PYTHON) -m twine upload $(PY_WHEEL)
	npm publish $(NPM_TARBALL) --access public

$(PY_WHEEL): $(PY_SDK) guest-sdk/python/pyproject.toml wit/controller.wit
	rm -rf $(SDK_OUT)/python && mkdir -p $(SDK_OUT)/python/kubewasm_guest/wit
	cp guest-sdk/python/pyproject.toml $(SDK_OUT)/python/
	cp guest-sdk/python/kubewasm_guest/*.py $(SDK_OUT)/python/kubewasm_guest/
	cp wit/controller.wit $(SDK_OUT)/python/kubewasm_guest/wit/
	$(PYTHON) -m pip wheel --quiet --disable-pip-version-check --no-deps $(SDK_OUT)/python -w $(SDK_OUT)

$(NPM_TARBALL): $(JS_SDK) guest-sdk/js/package.json wit/controller.wit
	rm -rf $(SDK_OUT)/js && mkdir -p $(SDK_OUT)/js/wit
	cp -r guest-sdk/js/package.json guest-sdk/js/src guest-sdk/js/bin $(SDK_OUT)/js/
	cp wit/controller.wit $(SDK_OUT)/js/wit/
	cd $(SDK_OUT)/js && npm pack --silent --pack-destination .. >/dev/null

# `kubewasm new` in each language, outside the repo: setup, test, build,
# replay, as the "Write your first plugin" guides say.
new-project-tests: test-build sdk
	tests/new-project/run

fmt:
	$(CARGO) fmt --all

# The project's Go programs (the real control plane's module, the client-go
# program of the difference tool).
GO_MODULES := tests/real-cluster tests/real-node tests/difference/client-go bench/peers/controller-runtime deploy/grafana/check guest-sdk/go $(GO_PLUGIN_DIRS)

# The checks that need no Rust build: rustfmt, gofmt, and the fuzz crate's
# own lock file still matching the workspace it builds (fuzz/run builds
# with --locked: a dependency added to the workspace must be added there too).
format-check:
	$(CARGO) tree --locked --depth 0 --manifest-path fuzz/Cargo.toml > /dev/null
	@unformatted=$$(gofmt -l $(GO_MODULES)); [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted"; exit 1; }
	$(CARGO) fmt --all -- --check
	rustfmt --check --edition 2024 fuzz/fuzz_targets/*.rs

# The Go SDK's generated bindings (internal/wit) are vetted without the
# unsafeptr check: their pointers are into the component's linear memory.
go-vet:
	@for m in $(GO_MODULES); do echo "go vet ./... in $$m"; (cd $$m && go vet $$(go list ./... | grep -v /internal/wit)) || exit 1; done
	@echo "go vet of the Go SDK and plugins for wasip1"
	@cd guest-sdk/go && GOOS=wasip1 GOARCH=wasm go vet . && GOOS=wasip1 GOARCH=wasm go vet -unsafeptr=false ./internal/...
	@for p in $(GO_PLUGIN_DIRS); do (cd $$p && GOOS=wasip1 GOARCH=wasm go vet ./...) || exit 1; done

# clippy's driver, and `-D warnings` as `cargo clippy` hands it over.
CLIPPY_DRIVER = $(shell rustc --print sysroot)/bin/clippy-driver
CLIPPY_DENY_WARNINGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# `go vet` (its modules' downloads and type checks, little CPU) runs beside the
# Rust lints, its output shown at the end; every one of them must pass.
lint: format-check
	@mkdir -p $(TARGET_DIR); echo "go vet ./... in $(GO_MODULES), beside the Rust lints"; \
	$(MAKE) --no-print-directory go-vet > $(TARGET_DIR)/go-vet.log 2>&1 & vet=$$!; \
	status=0; { \
	  echo "$(CARGO) clippy --workspace --all-targets -- -D warnings" && \
	  $(CARGO) clippy --workspace --all-targets -- -D warnings && \
	  echo "$(CARGO) clippy --target $(WASM_TARGET) (the Rust plugins and test guests)" && \
	  $(CARGO) clippy --target $(WASM_TARGET) $(addprefix -p ,$(RUST_PLUGINS) $(RUST_TEST_PLUGINS)) -- -D warnings; \
	} || status=1; \
	wait $$vet || { echo "go vet failed:"; status=1; }; cat $(TARGET_DIR)/go-vet.log; exit $$status

# Tests plugin authors write in their own language, and the SDK harnesses
# run of the shared conformance fixtures (tests/conformance/).
guest-tests: $(NPM_STAMP)
	cd guest-sdk/python && $(PYTHON) -m unittest -v
	cd plugins/tenant-bootstrap && PYTHONPATH=../../guest-sdk/python $(PYTHON) -m unittest -v
	node --test guest-sdk/js/test/ plugins/configmap-replicator/
	cd guest-sdk/go && go test ./...
	@for p in $(GO_PLUGIN_DIRS); do (cd $$p && go test ./...) || exit 1; done

# `make test` lints as it builds: clippy's driver wraps rustc for the
# workspace's crates (what `cargo clippy` does, in a check), so the
# dependencies compile once instead of checked once for clippy and built
# again; a clippy warning fails the build that meets it (the wasm plugins' too).
# go vet comes last, when the Go builds of the tests have filled its cache.
test: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
test: export CLIPPY_ARGS = $(CLIPPY_DENY_WARNINGS)
# Each step is timed (.ci/timed): the table of them ends the run, or the first
# step that fails; under .ci/run, its own table holds them. The plugins are
# built three recipes at a time: the Python and JavaScript components (one
# core each) beside cargo's wasm builds (the second of which waits for the
# first's lock), whose last steps (each plugin's link-time optimisation)
# leave a core idle.
test:
	@$(if $(KUBEWASM_STAGE_DEPTH),,$(TIMED) --reset)
	$(TIMED) setup $(SUBMAKE) setup
	$(TIMED) format-check $(SUBMAKE) format-check
	$(TIMED) "plugins, test-plugins (make -j3)" $(SUBMAKE) -j3 plugins test-plugins
	$(TIMED) "test-build (clippy -D warnings)" $(SUBMAKE) test-build
	$(TIMED) go-plugins $(SUBMAKE) go-plugins
	$(TIMED) guest-tests $(SUBMAKE) guest-tests
	$(TIMED) new-project-tests $(SUBMAKE) new-project-tests
	$(TIMED) helm .ci/helm
	$(TIMED) "cargo test" $(CARGO) test --workspace --all-targets
	$(TIMED) "cargo test --doc" $(CARGO) test --workspace --doc
	$(TIMED) test-real $(SUBMAKE) test-real
	$(TIMED) go-vet $(SUBMAKE) go-vet
	@$(if $(KUBEWASM_STAGE_DEPTH),,$(TIMED) --report)

# The host's suites against a real control plane (tests/real-cluster/up, a
# fresh one per test; built first, minutes from nothing): in full, or in CI
# (CI=true) their reduced form, REAL_REDUCED's tests (each of them in its
# own CI form): the examples through `kubewasm run`, a late CRD, a tenant
# under the real RBAC and SubjectAccessReview, a Plugin resource, a ring
# on the real server's shard selectors, the soak, a reconcile's trace, the
# chart's manifests applied and its Deployment's Pods run, a real node's Pods, the chart installed
# on it by helm, kubectl's client-side apply and a List's
# validation; in full only, a partitioned leader's fencing and the rest of
# kubectl's suite.
# A suite is a module of the one integration-test binary (tests/tests/suites),
# a test the start of its path there.
REAL_SUITES := engine controllers discovery tenancy plugin_resources real_node installed ring shard_selectors soak traces chart partition watches kubectl
REAL_REDUCED := engine::myapp_should_converge engine::tenant_bootstrap_in_python \
	engine::configmap_replicator_in_javascript discovery::a_directory_plugin_should_wait_for_its_crd \
	tenancy::a_tenant_plugin_should_run_only_while plugin_resources::a_plugin_resource_should_load_swap \
	ring::a_ring_should_grow shard_selectors::shard_selectors_should_split soak::ten_plugins_should_converge \
	traces::a_span_per_reconcile_should_reach chart::the_plain_manifests_should_be_the_chart \
	plugin_resources::the_deploy_manifests_should_run real_node::a_real_node_should_run \
	installed::the_chart_should_install_on_a_real_node \
	kubectl::kubectl_should_treat kubectl::kubectl_create_should_validate
test-real: plugins test-plugins test-build
	tests/real-cluster/build --node
	KUBEWASM_TEST_CLUSTER=real $(CARGO) test --workspace --test suites -- \
		$(if $(filter true,$(CI)),$(REAL_REDUCED),$(addsuffix ::,$(REAL_SUITES)))

# The plain manifests are the chart rendered: deploy/host.yaml (leader
# election) and deploy/sharded.yaml (--sharding); tests/tests/suites/chart.rs checks
# they are.
# The host's image (deploy/build-image), with no container engine and no
# base image: the release binary without the embedded API server (or
# IMAGE_BINARY's), exactly the libraries it loads, user 65532, as an OCI image
# layout in target/image; IMAGE=HOST/REPO:TAG pushes it there with skopeo
# (IMAGE_TLS_VERIFY=false for a registry on loopback over plain HTTP;
# IMAGE_CERT_DIR: a directory of the registry's CA certificates, *.crt, for
# a registry of a private CA; the credentials are skopeo's, `skopeo login`).
IMAGE_BINARY ?= $(TARGET_DIR)/release/kubewasm
IMAGE_TLS_VERIFY ?= true
IMAGE_CERT_DIR ?=
image: setup
ifeq ($(IMAGE_BINARY),$(TARGET_DIR)/release/kubewasm)
	$(CARGO) build --locked --release -p kubewasm --bin kubewasm --no-default-features
endif
	deploy/build-image --binary $(IMAGE_BINARY) --out $(TARGET_DIR)/image
ifneq ($(IMAGE),)
	skopeo copy --dest-tls-verify=$(IMAGE_TLS_VERIFY) $(if $(IMAGE_CERT_DIR),--dest-cert-dir=$(IMAGE_CERT_DIR)) \
		oci:$(TARGET_DIR)/image:$$($(IMAGE_BINARY) --version | cut -d' ' -f2) docker://$(IMAGE)
endif

HELM := $(TARGET_DIR)/tools/helm
MANIFEST_HEADER = \# Generated by make manifests from deploy/chart/kubewasm (edit the chart, not this file):\n\# kubectl apply -f deploy/crds.yaml -f deploy/$(1)

manifests: setup
	.ci/helm
	@{ printf '$(call MANIFEST_HEADER,host.yaml)\n'; $(HELM) template kubewasm deploy/chart/kubewasm -n kubewasm-system \
	  --set namespace.create=true; } > deploy/host.yaml
	@{ printf '$(call MANIFEST_HEADER,sharded.yaml)\n'; $(HELM) template kubewasm deploy/chart/kubewasm -n kubewasm-system \
	  --set namespace.create=true --set mode=sharded --set replicas=3; } > deploy/sharded.yaml
	@echo "deploy/host.yaml and deploy/sharded.yaml rendered from deploy/chart/kubewasm"

dev: setup plugins build go-plugins
	$(TARGET_DIR)/debug/kubewasm dev --plugins $(OUT) --metrics-addr 127.0.0.1:0 --kubeconfig-out $(TARGET_DIR)/kubewasm-dev.kubeconfig

# The soak's long form (make test runs its one-minute form).
soak: plugins test-plugins build
	KUBEWASM_SOAK=full KUBEWASM_SOAK_WRITE=BENCHMARKS.md $(CARGO) test --workspace --test suites -- soak:: --nocapture

fuzz:
	fuzz/run

# Tests that fail by chance (tests/stress): STRESS's tests (cargo test's
# arguments; by default every crate's unit tests and every integration suite)
# STRESS_ROUNDS (10) times, STRESS_COPIES (2) copies side by side; every
# failure printed with its log. --workspace, whatever the tests chosen: the
# build's features are then make test's (a -p of one crate builds its
# dependencies again with that crate's alone).
STRESS ?= --workspace --lib --test suites
stress: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
stress: export CLIPPY_ARGS = $(CLIPPY_DENY_WARNINGS)
stress: plugins test-plugins test-build go-plugins
	tests/stress $(STRESS)

# The crates of the sandbox, TLS and HTTP stacks that have a newer patch
# release in their line, and whether it resolves here (a report; STRICT=1
# fails when one does).
deps-check:
	.ci/deps-check $(if $(STRICT),--strict)

real-cluster:
	tests/real-cluster/up $(TARGET_DIR)/real-cluster/run --nodes $(or $(NODES),3) --real-nodes $(or $(REAL_NODES),0)

# Everything that derives from the Kubernetes release tests/real-cluster/go.mod
# pins (k8s.io/kubernetes), written again; moving to another release is: change
# the pin (and k8s-openapi's feature: the compiler and tests/tests/suites/version.rs
# say where), `make real-cluster` in one shell, this in another, then the compiler's
# complaints and `make difference`. KUBECONFIG is that fresh cluster's, for what
# is recorded from it (its discovery, its OpenAPI documents, its bootstrap RBAC policy).
KUBERNETES_KUBECONFIG ?= $(TARGET_DIR)/real-cluster/run/kubeconfig
kubernetes-version:
	tests/real-cluster/discovery $(KUBERNETES_KUBECONFIG) > types/src/release.json.new
	mv types/src/release.json.new types/src/release.json
	tests/real-cluster/bootstrap-rbac $(KUBERNETES_KUBECONFIG) > apiserver/src/store/bootstrap-rbac.json.new
	mv apiserver/src/store/bootstrap-rbac.json.new apiserver/src/store/bootstrap-rbac.json
	types/served-types "$$(dirname "$$($(CARGO) metadata --format-version 1 \
		| jq -r '.packages[] | select(.name == "k8s-openapi") | .manifest_path')")" \
		types/src/release.json > types/src/served.rs.new
	mv types/src/served.rs.new types/src/served.rs
	apiserver/protos/vendor
	cd tests/real-cluster && go run ./gotypes > ../../apiserver/protos/gotypes.txt.new
	mv apiserver/protos/gotypes.txt.new apiserver/protos/gotypes.txt
	tests/real-cluster/openapi $(KUBERNETES_KUBECONFIG) > apiserver/src/schema/openapi/release.json.new
	gzip -9n < apiserver/src/schema/openapi/release.json.new > apiserver/src/schema/openapi/release.json.gz
	rm apiserver/src/schema/openapi/release.json.new
	$(CARGO) build -p kubewasm
	$(TARGET_DIR)/debug/kubewasm types --lang python > guest-sdk/python/kubewasm_guest/types.py
	$(TARGET_DIR)/debug/kubewasm types --lang js > guest-sdk/js/src/types.js
	$(TARGET_DIR)/debug/kubewasm types --lang go > guest-sdk/go/builtin_types.go

# Starts both servers itself; ONLY=PREFIX runs some sequences, SHOW=1 prints each difference,
# FUZZ=N sends N mutants of them instead (SEED=S).
difference: build
	$(CARGO) run -p kubewasm-tests --bin difference -- $(if $(ONLY),--only $(ONLY)) $(if $(SHOW),--show) \
		$(if $(FUZZ),--fuzz $(FUZZ) $(if $(SEED),--seed $(SEED)))

kube-rs-tests: build
	tests/kube-rs/run

bench: plugins test-plugins build go-plugins image
	$(CARGO) build --release -p kubewasm -p kube-runtime-myapp  # the peers bench runs the release binaries
	$(CARGO) bench -p kubewasm-tests --bench image --bench contract --bench languages --bench apiserver --bench hostile --bench engine --bench lifecycle --bench tenants --bench fleet --bench devcluster --bench peers -- --write BENCHMARKS.md

clean:
	$(CARGO) clean
	rm -rf node_modules
