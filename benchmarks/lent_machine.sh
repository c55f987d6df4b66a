#!/usr/bin/env bash
# The checks this project runs on a lent 16-core GPU machine (docs/development.md, "Runs on a lent
# GPU machine"), one stage per call: `bash benchmarks/lent_machine.sh STAGE CODE`, CODE the commit
# run (the copy there has no git). Needs the ignored bundle .devbundle/site.tar.xz (carry it).
#   gpu    the CUDA tests (skipped without a GPU), then IMPACT_EXT (learner on the GPU) and DFD_EXT
#          with 15 runners on Hopper-v5 (benchmarks/throughput.py rows)
#   scale  IMPACT_EXT vs APPO (matched) at 4/32/16 runners of a fixed-cost env, 0 and 2 learners
#          (2026-11-28, H200: the gpu stage took 324 s; this one ran past 420 s before its last two
#          runs: builds take 9-36 s each; give it a whole call)
# Rows and logs go to $OUT.
set -u
stage=$1 code=$2
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p /tmp/site && [ -e /tmp/site/ray ] || tar xJf .devbundle/site.tar.xz -C /tmp/site || exit 2
export PYTHONPATH=/tmp/site:$PWD
nproc; nvidia-smi -L
common='{"min_time_s_per_iteration": 2}'
case $stage in
gpu)
  timeout 260 python3 -m pytest -q -p no:cacheprovider -rA -k gpu \
    tests/unit/common/offpolicy/test_td3.py tests/smoke/algorithms/impact/test_impact_scale.py \
    tests/smoke/algorithms/aesrl/test_aesrl.py tests/unit/common/erl/test_env_runner.py 2>&1 | tee $OUT/gpu_tests.log | tail -25
  timeout 150 python3 -m benchmarks.throughput --algos IMPACT_EXT --env Hopper-v5 --runners 15 --learners 1 \
    --gpus-per-learner 1 --seconds 30 --warmup-iters 2 --common "$common" --code "$code" --label lent-gpu \
    --out $OUT/throughput.jsonl 2>&1 | grep -E "^(IMPACT|APPO|DFD)|Error" 
  timeout 110 python3 -m benchmarks.throughput --algos DFD_EXT --env Hopper-v5 --runners 15 \
    --seconds 30 --warmup-iters 2 --code "$code" --label lent-gpu \
    --out $OUT/throughput.jsonl 2>&1 | grep -E "^(IMPACT|APPO|DFD)|Error"
  ;;
scale)
  for r in 4 32 16; do
    timeout 150 python3 -m benchmarks.throughput --algos IMPACT_EXT APPO --matched --runners $r --learners 0 2 \
      --env rllib_ext/VariableLength-v0 --env-config '{"min_len": 100, "max_len": 100, "step_sleep_s": 0.001}' \
      --seconds 8 --warmup-iters 2 --num-cpus 48 --common "$common" --code "$code" --label lent-16core \
      --out $OUT/throughput.jsonl 2>&1 | grep -E "^(IMPACT|APPO|DFD)|Error"
  done
  ;;
esac
ls -la $OUT
