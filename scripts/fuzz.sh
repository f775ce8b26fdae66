#!/usr/bin/env bash
# Runs a cargo-fuzz (libFuzzer) target of fuzz/ for SECONDS and ends with the line
#   TARGET: N execs, C crashes
# Exit 1 when the run found a crash, an OOM (-rss_limit_mb=2048) or a timeout (-timeout=10);
# the input is kept in fuzz/artifacts/TARGET/. `all` runs every target in turn.
#
#   scripts/fuzz.sh TARGET SECONDS     e.g. scripts/fuzz.sh otlp_request 60
#   scripts/fuzz.sh all SECONDS
#
# Installs cargo-fuzz if missing. The corpus grows in fuzz/corpus/TARGET (seeded from
# tests/fixtures/ and fuzz/seeds/; not committed). FUZZ_FLAGS adds libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(otlp_request otlp_json envelope chunk_roundtrip queue_record otlp_queue_record decompress config_yaml otlp_structured symbolize_elf)
CARGO_FUZZ_VERSION=0.13.2

usage() {
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS   (targets: ${TARGETS[*]})" >&2
  exit 2
}
[ $# -eq 2 ] || usage
target=$1
seconds=$2
[[ $seconds =~ ^[0-9]+$ ]] || usage
if [ "$target" != all ] && [[ ! " ${TARGETS[*]} " =~ " $target " ]]; then
  usage
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# cargo-fuzz passes nightly-only flags to rustc; RUSTC_BOOTSTRAP lets a stable toolchain take
# them. No sanitizer: the code is safe Rust, and panics, OOMs and timeouts are what we look for.
export RUSTC_BOOTSTRAP=1
build_target=${target/#all/}
(cd fuzz && cargo fuzz build -s none ${build_target:+"$build_target"}) >&2
bin_dir=fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release

seed() {
  local t=$1 dir=fuzz/corpus/$1
  mkdir -p "$dir"
  [ -n "$(ls -A "$dir")" ] && return 0
  case $t in
    otlp_request)
      cp tests/fixtures/otlp/*.pb "$dir/" ;;
    envelope)
      cp tests/fixtures/sentry/*/*.envelope "$dir/" ;;
    chunk_roundtrip)
      for f in tests/fixtures/sentry/*/*chunk*.envelope; do
        sed -n 3p "$f" >"$dir/$(basename "$f" .envelope).json"
      done ;;
    queue_record)
      for f in tests/fixtures/sentry/*/*chunk*.envelope; do
        { printf '\001'; sed -n 3p "$f"; } >"$dir/$(basename "$f" .envelope)"
      done
      for f in fuzz/seeds/chunk_roundtrip/*; do
        { printf '\003'; cat "$f"; } >"$dir/$(basename "$f")"
      done ;;
    otlp_queue_record)
      # OTLP profiles requests as records to build (mode 1) and as raw record bodies (mode 0).
      for f in tests/fixtures/otlp/*.pb; do
        { printf '\001'; cat "$f"; } >"$dir/$(basename "$f" .pb)"
        { printf '\000\001P\003\000\000\000\000\000\000\000'; cat "$f"; } >"$dir/$(basename "$f" .pb)-record"
      done ;;
    decompress)
      # gzip bombs: 16 MiB of zeros, raw mode (byte 0 = 1: gzip), limits 1 KiB and 64 MiB.
      { printf '\001\000\000'; head -c 16777216 /dev/zero | gzip -9; } >"$dir/gzip-bomb-1k"
      { printf '\001\377\377'; head -c 16777216 /dev/zero | gzip -9; } >"$dir/gzip-bomb-64m"
      { printf '\002\000\000'; printf 'hello' | gzip; } >"$dir/gzip-as-deflate" ;;
    config_yaml)
      cp examples/*.yaml "$dir/" ;;
  esac
}

dict_for() {
  case $1 in
    otlp_json) echo fuzz/dicts/otlp_json.dict ;;
    envelope | chunk_roundtrip | queue_record) echo fuzz/dicts/sentry_json.dict ;;
    config_yaml) echo fuzz/dicts/config_yaml.dict ;;
  esac
}

run() {
  local t=$1 log artifacts dict execs crashes rc=0
  seed "$t"
  artifacts=fuzz/artifacts/$t
  mkdir -p "$artifacts"
  log=$(mktemp)
  dict=$(dict_for "$t")
  # Crashes, OOMs, timeouts and leaks fail the run; slow units (libFuzzer's slow-unit-*, an
  # input near the timeout) are only reported.
  failures() { find "$artifacts" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | wc -l; }
  local before slow_before
  before=$(failures)
  slow_before=$(find "$artifacts" -type f -name 'slow-unit-*' | wc -l)
  local seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
  "$bin_dir/$t" "fuzz/corpus/$t" "${seeds[@]}" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=262144 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" ${dict:+-dict="$dict"} \
    ${FUZZ_FLAGS:-} >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
  crashes=$(($(failures) - before))
  local slow=$(($(find "$artifacts" -type f -name 'slow-unit-*' | wc -l) - slow_before))
  [ "$slow" -eq 0 ] || echo "$t: $slow slow input(s) kept in $artifacts/ (not failures)" >&2
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    grep -E '^(==|thread|SUMMARY|panicked|Output of|artifact_prefix|Test unit written)' "$log" | tail -20 >&2 || true
    [ "$crashes" -ne 0 ] || crashes=1
  fi
  # Coverage reached: libFuzzer's last status line (`cov`: edges, `ft`: features, `corp`:
  # corpus entries/size).
  local reached
  reached=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE '(cov|ft): [0-9]+|corp: [0-9]+/[0-9]+[a-zA-Z]*' | tr '\n' ' ' || true)
  [ -z "$reached" ] || echo "$t: reached ${reached% }" >&2
  rm -f "$log"
  echo "$t: ${execs:-0} execs, $crashes crashes"
  [ "$crashes" -eq 0 ]
}

if [ "$target" = all ]; then
  failed=0
  for t in "${TARGETS[@]}"; do
    run "$t" || failed=1
  done
  exit "$failed"
fi
run "$target"
