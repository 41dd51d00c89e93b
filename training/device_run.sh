#!/usr/bin/env bash
# The GPU runs that trained prose-llama: schedules of the same model, one after another, each stopped by time;
# every run's model folders (without the tokenizer, which .llama_prep/ holds) and metrics.json come back as tars
# under $OUT. Needs .llama_prep/ (python training/train_llama.py prepare) beside it.
# Usage: bash training/device_run.sh SECONDS_PER_RUN first|second   ($OUT: where the results go)
set -o pipefail
export PYTHONUNBUFFERED=1
limit=${1:-130}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
run() {  # name, extra arguments
    local name=$1
    shift
    python3 training/train_llama.py train --device cuda --time-limit "$limit" --out "/tmp/$name" "$@" 2>&1 |
        tee "$OUT/log_$name.txt"
    tar -C "/tmp/$name" -cf "$OUT/$name.tar" --exclude='tokenizer*' model metrics.json
    if [ -d "/tmp/$name/last" ]; then tar -C "/tmp/$name" -cf "$OUT/${name}_last.tar" --exclude='tokenizer*' last; fi
}
if [ "${2:-first}" = first ]; then  # attention dropout 0.1; the prose overfits after ~12 epochs
    run short --steps 1200
    run long --steps 2400
    run repeats --steps 2400 --repeat-frac 0.2
else  # no attention dropout, half the rows repeated passages (half of those random tokens)
    run half --steps 1400 --dropout 0 --repeat-frac 0.5 --random-frac 0.5 --export-last
    run third --steps 1400 --dropout 0 --repeat-frac 0.3 --random-frac 0.5 --export-last
fi
ls -la "$OUT"
