# Sourced by fuzz/run, fuzz/replay and fuzz/selftest: the one place that
# says how targets are built and run, so a finding replays under exactly
# the flags that found it.

# The targets CI fuzzes. `planted` (a test-only target that fails on inputs
# starting with PLANT) is left out: fuzz/selftest drives it.
TARGETS=(apiserver_request request_body patches selectors declaration outcome grants_file oci_manifest)

FUZZ_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SEEDS=${FUZZ_SEEDS:-$FUZZ_DIR/seeds}
WORK=${FUZZ_WORK:-$FUZZ_DIR}
# A unit slower than this is a finding (a hang for a 16 KiB input).
TIMEOUT=${FUZZ_TIMEOUT:-10}

export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-simplifycfg-branch-fold-threshold=0"
# A panic prints its stack (libfuzzer-sys aborts after the default hook).
export RUST_BACKTRACE=1
# An explicit target keeps the flags off build scripts and proc macros
# (which link without libFuzzer), as cargo-fuzz does.
HOST=$(rustc -vV | sed -n 's/^host: //p')
BIN=${CARGO_TARGET_DIR:-$FUZZ_DIR/target}/$HOST/release

build() {
  (cd "$FUZZ_DIR" && cargo build --release --locked --bins --target "$HOST")
}

# The flags of every run, found or replayed. -rss_limit_mb: the server's
# bounds hold a request to far less.
FLAGS=(-rss_limit_mb=2048 -timeout="$TIMEOUT" -max_len=16384 -print_final_stats=1)

# kind ARTIFACT LOG: what libFuzzer found, by the name it wrote the input
# under, else by its report.
kind() {
  case "$(basename "$1")" in
    crash-*) echo crash ;;
    timeout-*) echo timeout ;;
    oom-*) echo oom ;;
    leak-*) echo leak ;;
    slow-unit-*) echo slow-unit ;;
    *) case "$(grep -m1 -oE 'ERROR: libFuzzer: [a-z-]+' "$2")" in
         *deadly-signal | *deadly) echo crash ;;
         *timeout) echo timeout ;;
         *out-of-memory) echo oom ;;
         *leak*) echo leak ;;
         *) echo crash ;;
       esac ;;
  esac
}

# report TARGET ARTIFACT LOG: everything needed to reproduce a finding, in
# the log itself: the target, the kind, libFuzzer's report and stack, the
# input (size and base64) and the command that replays it.
report() {
  local target=$1 artifact=$2 log=$3
  echo "=================== fuzz finding: target=$target kind=$(kind "$artifact" "$log") size=$(wc -c <"$artifact") bytes"
  echo "--- libFuzzer's report"
  # From the panic or libFuzzer's error to its summary, at most 120 lines.
  awk '/^thread .* panicked at|^==[0-9]+== ERROR/ {on=1} on {print; if (++n >= 120) exit} /^SUMMARY:/ {if (on) exit}' "$log"
  # The input once, inside the command that replays it.
  echo "--- the input ($(wc -c <"$artifact") bytes, base64) in the command that reproduces it, run from the"
  echo "--- repository's root (add --save NAME once fixed, to keep it as a seed):"
  echo "fuzz/replay $target <<'INPUT'"
  base64 -w 76 "$artifact"
  echo "INPUT"
  echo "=================== end of finding"
}

# replay TARGET: every input kept for TARGET runs once; one that fails is
# reported (libFuzzer names each input before running it) and fails.
replay() {
  local target=$1 log input
  local inputs=("$SEEDS/$target"/*)
  [ -e "${inputs[0]}" ] || { echo "replay $target: no kept inputs"; return 0; }
  log=$(mktemp)
  mkdir -p "$WORK/artifacts/$target"
  if "$BIN/$target" "${FLAGS[@]}" -artifact_prefix="$WORK/artifacts/$target/replay-" "${inputs[@]}" >"$log" 2>&1; then
    echo "replay $target: ${#inputs[@]} kept inputs pass"
    rm -f "$log"
    return 0
  fi
  input=$(sed -n 's/^Running: //p' "$log" | tail -n 1)
  echo "replay $target: the kept input $input fails"
  report "$target" "$input" "$log"
  rm -f "$log"
  return 1
}

# fuzz TARGET SECONDS: TARGET fuzzed from its kept inputs; each finding
# reported.
fuzz() {
  local target=$1 seconds=$2 artifacts=$WORK/artifacts/$1 log status=0 found any=0
  mkdir -p "$WORK/corpus/$target" "$artifacts"
  find "$artifacts" -maxdepth 1 -type f -delete
  log=$(mktemp)
  # FUZZ_KEEP_GOING (a campaign, not CI): fuzz on past findings, each one
  # written down, in a child process libFuzzer restarts.
  local more=()
  [ -z "${FUZZ_KEEP_GOING:-}" ] || more=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  # FUZZ_SEED (CI): libFuzzer's random choices from that seed, from the
  # kept inputs alone (the working corpus emptied first), so a commit's run
  # tries the same inputs in the same order every time, as far as its time
  # reaches: a finding there is found again by running it again, not by luck.
  if [ -n "${FUZZ_SEED:-}" ]; then
    more+=(-seed="$FUZZ_SEED")
    find "$WORK/corpus/$target" -mindepth 1 -delete
  fi
  echo "--- fuzz $target for ${seconds}s"
  "$BIN/$target" "$WORK/corpus/$target" "$SEEDS/$target" "${FLAGS[@]}" "${more[@]}" \
    -max_total_time="$seconds" -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
  grep -E '^(#[0-9]+.*(DONE|INITED)|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true
  for found in "$artifacts"/*; do
    [ -f "$found" ] || continue
    any=1
    report "$target" "$found" "$log"
  done
  if [ "$any" = 0 ] && [ "$status" != 0 ]; then
    echo "fuzz $target: libFuzzer exited $status without writing an input; its log ends:"
    tail -n 60 "$log"
    any=1
  fi
  rm -f "$log"
  [ "$any" = 0 ]
}
