#!/usr/bin/env bash
# A long fuzzing campaign, one lane (one core): runs `scripts/fuzz.sh TARGET SECONDS` for each
# TARGET in turn, round after round, until the executions recorded for it in LOG reach its goal.
# Run one lane per core, each with its own targets and the same LOG:
#
#   scripts/fuzz-campaign.sh LOG SECONDS TARGET:GOAL[:SECONDS] ...
#   e.g. scripts/fuzz-campaign.sh fuzz/campaign.log 600 envelope:10000000 decompress:10000000:300
#
# LOG gets the lines of scripts/fuzz.sh prefixed with the run's start time:
#   09:19:23 envelope: reached cov: 8409 ft: 31958 corp: 3248/84Mb
#   09:19:23 envelope: 674790 execs, 0 crashes
# so runs add up across lanes, restarts and sessions (GOAL counts only what LOG holds: subtract
# earlier runs recorded elsewhere). A lane stops when every goal is met or when the file
# LOG.stop exists (checked between runs: a run is never cut short, since an interrupted run
# counts as a failure). Exit 1 when any run found a crash, OOM or timeout (the lane goes on;
# inputs are in fuzz/artifacts/TARGET/).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || {
  sed -n 2,16p "$0" >&2
  exit 2
}
log=$1
seconds=$2
shift 2
touch "$log"
failed=0
while :; do
  progressed=0
  for spec in "$@"; do
    IFS=: read -r target goal run_seconds <<<"$spec"
    [ -e "$log.stop" ] && exit "$failed"
    done_execs=$(awk -v t="$target:" '$2 == t && $4 == "execs," { s += $3 } END { print s + 0 }' "$log")
    [ "$done_execs" -ge "$goal" ] && continue
    progressed=1
    started=$(date +%H:%M:%S)
    scripts/fuzz.sh "$target" "${run_seconds:-$seconds}" 2>&1 | grep -E "^$target: " |
      sed "s/^/$started /" >>"$log"
    tail -1 "$log" | grep -q ' 0 crashes$' || failed=1
  done
  [ "$progressed" -eq 1 ] || exit "$failed"
done
