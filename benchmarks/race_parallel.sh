#!/bin/bash
# Runs several `impact_vs_appo.py race` processes at once, one per "ALGO:SEEDS" group, each with its
# own local Ray (2 env runners + the learner = 3 CPUs). For a machine with at least 3 cores per
# group: the groups then run side by side on the same hardware, so their wall times compare.
#
#   benchmarks/race_parallel.sh BUDGET_S OUTDIR "ALGO:SEEDS[:KEY=JSON ...]" ... [-- RACE_ARGS...]
#   benchmarks/race_parallel.sh 150 /tmp/race "IMPACT_EXT:0 1 2" "IMPACT_EXT:3 4 5" \
#       "APPO:0 1 2" "APPO:3 4 5" "IMPALA:0 1 2"
#   benchmarks/race_parallel.sh 110 /tmp/probe "IMPACT_EXT:0 1 2 3" \
#       "IMPACT_EXT:0 1 2 3:standardize_advantages=true circular_buffer_iterations_per_batch=8"
#
# A group's KEY=JSON words (no spaces inside one) become the race's --impact-set options for
# IMPACT_EXT, --rival-set options for any other algorithm.
# Each group's log is OUTDIR/groupN.log; the runs' JSON lines are printed at the end.
# RACE_ARGS after "--" go to every race (e.g. -- --env Pendulum-v1 --target -300).
set -u -f   # -f: no globbing of JSON like [64,64]
if [ $# -lt 3 ]; then sed -n '2,15p' "$0"; exit 2; fi
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-$HERE/../.venv/bin/python}
BUDGET=$1; OUTDIR=$2; shift 2
groups=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do groups+=("$1"); shift; done
[ $# -gt 0 ] && shift
mkdir -p "$OUTDIR"
i=0; pids=()
for g in "${groups[@]}"; do
  algo="${g%%:*}"; rest="${g#*:}"; seeds="${rest%%:*}"
  sets=(); opt=--rival-set; [ "$algo" = IMPACT_EXT ] && opt=--impact-set
  if [ "$rest" != "$seeds" ]; then for kv in ${rest#*:}; do sets+=("$opt" "$kv"); done; fi
  echo "group$i: $algo seeds $seeds ${sets[*]:-}"
  # shellcheck disable=SC2086  # seeds are words
  "$PY" "$HERE/impact_vs_appo.py" race --algos "$algo" --seeds $seeds --budget-s "$BUDGET" \
    ${sets[@]+"${sets[@]}"} "$@" > "$OUTDIR/group$i.log" 2>&1 &
  pids+=($!); i=$((i + 1))
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
set +f
grep -h -E '^\{' "$OUTDIR"/group*.log | sort -u
exit $status
