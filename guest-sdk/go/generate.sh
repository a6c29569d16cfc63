#!/usr/bin/env bash
# Regenerates the component bindings this module commits (internal/wit)
# from the contract (wit/controller.wit), with wit-bindgen-cli 0.63.0
# (`cargo install --locked wit-bindgen-cli@0.63.0`), and copies beside
# them the runtime the generated code imports, go.bytecodealliance.org/pkg
# v0.4.0 (Apache-2.0 WITH LLVM-exception, LICENSE kept), from the source of
# the crate wit-bindgen-go 0.63.0 that cargo fetched with it: the Go module
# proxy does not serve that module, and authors need nothing but Go.
# Run by maintainers when the contract changes; authors never run it.
set -euo pipefail
cd "$(dirname "$0")"
WIT_BINDGEN=${WIT_BINDGEN:-wit-bindgen}
version=$("$WIT_BINDGEN" --version | awk '{print $2}')
[ "$version" = 0.63.0 ] || { echo "generate.sh: wit-bindgen $version, want 0.63.0" >&2; exit 1; }
crate=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/wit-bindgen-go-0.63.0 2>/dev/null | head -n 1)
[ -n "$crate" ] || { echo "generate.sh: the crate wit-bindgen-go 0.63.0 is not in cargo's registry" >&2; exit 1; }

rm -rf internal/wit/imports internal/wit/exports/wit_exports internal/witpkg
"$WIT_BINDGEN" go --quiet -w controller --pkg-name kubewasm.dev/guest/internal/wit \
  --out-dir internal/wit ../../wit/controller.wit 2>/dev/null
mkdir -p internal/witpkg
cp -r "$crate/src/pkg/wit/runtime" "$crate/src/pkg/wit/types" internal/witpkg/
cp "$crate/src/pkg/LICENSE" internal/witpkg/LICENSE
# The async and stream parts are for async functions, which the contract
# has none of.
rm -f internal/witpkg/types/future.go internal/witpkg/types/stream.go
find internal/wit internal/witpkg -name '*.go' -print0 |
  xargs -0 sed -i 's#"go.bytecodealliance.org/pkg/wit/#"kubewasm.dev/guest/internal/witpkg/#'
gofmt -w internal
echo "generate.sh: bindings of $(grep -m1 '^package' ../../wit/controller.wit) written to internal/"
