#!/usr/bin/env bash
# The fault soak (tests/soak.rs) for MINUTES against a release build: steady OTLP/gRPC load and
# SDK envelopes to the sentry exporter while the Sentry stand-in flaps (503, 429 with limits,
# resets, 30 s stalls), OTLP/gRPC load through the otlp exporter (durable queue) while its
# backend disappears for 40 s every 2 minutes, SDK envelopes through the profile_linking join
# buffer (30 s window) to that otlp exporter, so every kill finds chunks held, profilink is
# SIGKILLed and restarted every minute and (as root) the queues' tmpfs fills up for 20 s every
# 5 minutes.
# Ends with the test's one-line summary (`soak: ... lost=0 ...`); exit 1 when anything was
# lost, duplicated, over the memory bound, or when profilink exited on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:?usage: scripts/soak.sh MINUTES}
log=$(mktemp -t profilink-soak.XXXXXX)
status=0
PROFILINK_SOAK_SECONDS=$((minutes * 60)) \
  cargo test --release --locked --workspace --test soak -- --nocapture >"$log" 2>&1 || status=$?
grep -E '^soak:|panicked|assertion' "$log" || tail -20 "$log"
echo "full log: $log"
exit "$status"
