#!/usr/bin/env bash
# Scale-out on one machine, to try it: N profilink replicas and nginx (nginx.conf.template
# beside this script) on loopback, load from examples/load/ through nginx, then what each
# replica took and wrote.
#
#   examples/scale-out/run.sh [--replicas N] [--seconds T] [--clients C] [--sessions K]
#                             [--round-robin] [--keep]
#
# Defaults: 3 replicas, 10 s, 4 clients (agents, `x-agent-id: load-<i>`), 16 resource copies per
# request; affinity on the agent header unless --round-robin. --keep leaves the work directory
# (configs, logs, nginx access log with the upstream of every request, written envelopes).
#
# Needs nginx (Debian: apt-get install nginx), curl, python3 (free ports) and release builds of
# the binary and the load example (built when missing). Replicas write chunks with the `file`
# exporter into their own directories, so no Sentry is needed.
set -euo pipefail
cd "$(dirname "$0")/../.."

replicas=3 seconds=10 clients=4 sessions=16 keep=0
balance='hash $otlp_affinity consistent;'
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --round-robin) balance=''; shift ;;
    --keep) keep=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || { echo "nginx is missing (apt-get install nginx)" >&2; exit 1; }
bin=$PWD/target/release/profilink
load=target/release/examples/load
if [ ! -x "$bin" ] || [ ! -x "$load" ]; then
  cargo build --release --locked --bin profilink --example load
fi

work=$(mktemp -d /tmp/profilink-scale-out.XXXXXX)
chmod 755 "$work"   # nginx workers (an unprivileged user under root) use its tmp/ directory
mkdir -p "$work/tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$keep" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

otlp_servers='' sentry_servers='' metrics=()
for i in $(seq 0 $((replicas - 1))); do
  dir="$work/replica-$i"
  mkdir -p "$dir"
  grpc=127.0.0.1:$(free_port) envelopes=127.0.0.1:$(free_port) m=127.0.0.1:$(free_port)
  cat >"$dir/profilink.yaml" <<EOF
receivers:
  otlp: { protocols: { grpc: { endpoint: "$grpc" } } }
  sentry: { endpoint: "$envelopes" }
exporters:
  file: { path: ./envelopes, chunk_idle_timeout: 5s }
service:
  pipelines:
    profiles: { receivers: [otlp, sentry], exporters: [file] }
  telemetry:
    metrics: { address: "$m" }
    logs: { level: warn }
EOF
  (cd "$dir" && exec "$bin" run --config profilink.yaml 2>profilink.stderr) &
  pids+=($!)
  otlp_servers+="server $grpc max_fails=1 fail_timeout=1s; "
  sentry_servers+="server $envelopes max_fails=1 fail_timeout=1s; "
  metrics+=("$m")
done

otlp_listen=127.0.0.1:$(free_port) sentry_listen=127.0.0.1:$(free_port)
sed -e "s#@PREFIX@#$work#g" \
    -e "s#@OTLP_LISTEN@#$otlp_listen#" \
    -e "s#@SENTRY_LISTEN@#$sentry_listen#" \
    -e "s#@OTLP_SERVERS@#$otlp_servers#" \
    -e "s#@SENTRY_SERVERS@#$sentry_servers#" \
    -e "s#@OTLP_BALANCE@#$balance#" \
    -e 's#@SENTRY_BALANCE@#hash $remote_addr consistent;#' \
    examples/scale-out/nginx.conf.template >"$work/nginx.conf"
"$nginx_bin" -p "$work" -c "$work/nginx.conf" -e "$work/error.log" &
pids+=($!)

# Wait (bounded) for every replica's metrics endpoint and for nginx.
for m in "${metrics[@]}"; do
  for _ in $(seq 100); do curl -sf "http://$m/metrics" >/dev/null && break; sleep 0.1; done
done
for _ in $(seq 100); do (exec 3<>"/dev/tcp/${otlp_listen%:*}/${otlp_listen#*:}") 2>/dev/null && break; sleep 0.1; done

echo "== $replicas replicas behind nginx ($otlp_listen, ${balance:-round-robin})"
"$load" --target "$otlp_listen" --clients "$clients" --seconds "$seconds" --sessions "$sessions"

metric() { # metric NAME LABEL-FILTER ADDR: the sum of the matching series
  curl -sf "http://$3/metrics" | grep "^$1{" | grep -- "$2" | awk '{s += $2} END {print s + 0}'
}
# Stop the replicas (SIGTERM: the file exporter writes the open windows), then count.
for i in $(seq 0 $((replicas - 1))); do
  requests[$i]=$(metric profilink_receiver_accepted_requests_total 'receiver="otlp"' "${metrics[$i]}")
  samples[$i]=$(metric profilink_receiver_accepted_samples_total 'receiver="otlp"' "${metrics[$i]}")
done
for i in $(seq 0 $((replicas - 1))); do kill -TERM "${pids[$i]}"; done
for i in $(seq 0 $((replicas - 1))); do wait "${pids[$i]}" 2>/dev/null || true; done
echo "== per replica"
printf '%-8s %10s %14s %10s %10s\n' replica requests samples chunks sessions
for i in $(seq 0 $((replicas - 1))); do
  dir="$work/replica-$i/envelopes"
  chunks=$(find "$dir" -maxdepth 1 -name '*.envelope' 2>/dev/null | wc -l)
  sessions_seen=$( (cat "$dir"/*.envelope 2>/dev/null || true) | { grep -o '"profiler_id":"[0-9a-f]*"' || true; } | sort -u | wc -l)
  printf '%-8s %10s %14s %10s %10s\n' "$i" "${requests[$i]}" "${samples[$i]}" "$chunks" "$sessions_seen"
done
echo "(sessions: distinct profiler ids in a replica's chunks; with affinity they do not overlap"
echo " between replicas, with --round-robin every replica sees every session)"
