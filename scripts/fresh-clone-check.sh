#!/usr/bin/env bash
# The fresh-clone check: clone the repository (the committed HEAD) into an empty temporary
# directory, with nothing beside it (no ../shared), and run the README's two set-up commands
# there in their cheap forms:
#
#   1. build (`cargo build`, debug), then start the service with no configuration for a few
#      seconds: it must listen on the OTLP ports (4317 gRPC, 4318 HTTP), log no error, write
#      nothing but its data directory (`profilink-data/`), and stop cleanly on Ctrl-C (SIGINT);
#   2. the tests: `scripts/test.sh` (the whole suite); with `--quick`, every test target is
#      built (`cargo test --workspace --no-run`) and only the tests that read the bundled
#      fixtures run; with other arguments, `scripts/test.sh ARGS…` (e.g. `--test cli_translate`).
#
# Usage: scripts/fresh-clone-check.sh [--quick | ARGS…]
#
# Environment:
#   FRESH_CLONE_REV         what to check out (default: HEAD of this checkout; uncommitted
#                           changes are never part of the check)
#   FRESH_CLONE_TARGET_DIR  CARGO_TARGET_DIR of the clone (default: a new directory next to the
#                           clone, deleted at the end; a directory given here is kept)
#   FRESH_CLONE_KEEP=1      keep the clone (and a default target directory) for inspection
#
# The service uses ports 4317/4318 as the README's command does; when another process already
# holds one of them, it is moved to free ports (PROFILINK_OTLP_GRPC_ENDPOINT /
# PROFILINK_OTLP_HTTP_ENDPOINT) and the check says so.
set -euo pipefail

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
rev=$(git -C "$repo" rev-parse "${FRESH_CLONE_REV:-HEAD}")
quick=0
if [[ "${1:-}" == "--quick" ]]; then
  quick=1
  shift
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/profilink-fresh-clone.XXXXXX")
clone="$tmp/profilink"
if [[ -n "${FRESH_CLONE_TARGET_DIR:-}" ]]; then
  target="$FRESH_CLONE_TARGET_DIR"
else
  target="$tmp/target"
fi
service_pid=
cleanup() {
  if [[ -n "$service_pid" ]] && kill -0 "$service_pid" 2>/dev/null; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  if [[ "${FRESH_CLONE_KEEP:-0}" == 1 ]]; then
    echo "fresh-clone: kept $tmp"
  else
    # The clone, the service log and (by default) the target directory all live in $tmp.
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

step() { echo; echo "fresh-clone: == $*"; }
fail() { echo "fresh-clone: FAILED: $*" >&2; exit 1; }

step "clone ${rev:0:12} of $repo into $clone"
git clone --quiet "$repo" "$clone"
git -C "$clone" checkout --quiet --detach "$rev"
[[ -e "$tmp/shared" ]] && fail "$tmp/shared exists; the check needs nothing beside the clone"
if [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]]; then
  echo "fresh-clone: note: uncommitted changes in $repo are not part of the check"
fi
cd "$clone"
export CARGO_TARGET_DIR="$target"

step "build (cargo build --locked)"
cargo build --locked

# A port is taken when something accepts a connection on it.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
grpc_port=4317
http_port=4318
if port_taken 4317 || port_taken 4318; then
  grpc_port=$(free_port)
  http_port=$(free_port)
  echo "fresh-clone: note: 4317/4318 are in use on this machine; using $grpc_port/$http_port"
  export PROFILINK_OTLP_GRPC_ENDPOINT="127.0.0.1:$grpc_port"
  export PROFILINK_OTLP_HTTP_ENDPOINT="127.0.0.1:$http_port"
fi

step "start the service with no configuration"
log="$tmp/service.log"
env -u SENTRY_DSN "$CARGO_TARGET_DIR/debug/profilink" >"$log" 2>&1 &
service_pid=$!
listening=0
for _ in $(seq 1 100); do
  kill -0 "$service_pid" 2>/dev/null || { cat "$log"; fail "the service exited at start"; }
  if port_taken "$grpc_port" && port_taken "$http_port"; then
    listening=1
    break
  fi
  sleep 0.2
done
[[ $listening == 1 ]] || { cat "$log"; fail "nothing listens on $grpc_port and $http_port after 20 s"; }
echo "fresh-clone: listening on $grpc_port (OTLP gRPC) and $http_port (OTLP HTTP)"
sleep 3
kill -0 "$service_pid" 2>/dev/null || { cat "$log"; fail "the service exited while running"; }
kill -INT "$service_pid"
status=0
wait "$service_pid" || status=$?
service_pid=
cat "$log"
[[ $status == 0 ]] || fail "the service exited with $status after SIGINT"
if grep -qE 'ERROR|panicked' "$log"; then
  fail "the service logged an error"
fi
# Nothing but the data directory appeared in the clone (build outputs are elsewhere).
written=$(git status --porcelain --ignored --untracked-files=all | grep -v ' profilink-data/' || true)
[[ -z "$written" ]] || fail "the service wrote outside profilink-data/: $written"
data_files=$(find profilink-data -type f 2>/dev/null | wc -l)
echo "fresh-clone: the service stopped cleanly; profilink-data/ holds $data_files file(s)"
rm -rf profilink-data

if [[ $quick == 1 ]]; then
  step "build every test target (cargo test --workspace --no-run)"
  cargo test --workspace --locked --no-run
  step "run the tests that read the bundled fixtures"
  cargo test --locked --test cli_translate --test cli_validate
  cargo test --locked -p profilink-proto --test envelope_fixtures
  cargo test --locked -p profilink-translator --test otlp_to_sentry_fixtures \
    --test sentry_to_otlp_fixtures
else
  step "scripts/test.sh $*"
  scripts/test.sh "$@"
fi

step "passed (${rev:0:12}, $([[ $quick == 1 ]] && echo quick || echo "scripts/test.sh $*"))"
