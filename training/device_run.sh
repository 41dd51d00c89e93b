#!/usr/bin/env bash
# The GPU run for prose-llama: the same settings (seed 1234, 1300 steps; the schedule depends on the step alone)
# trained twice, one after the other, and the two runs compared step by step. Under $OUT: gpu.txt, log_run1.txt,
# log_run2.txt, metrics_run1.json, metrics_run2.json, compare.json (identical loss histories, or by how much they
# differ), sha256.txt and prose-llama/ (run 1's last step, the folder layout of explorer/assets/prose-llama).
# Needs .llama_prep/ (python training/train_llama.py prepare) beside it.
# Usage: bash training/device_run.sh [CAP_SECONDS_PER_RUN]   (default 200: only a safety cap; a run it stops has
# "complete": false in its metrics, and is not the reproducible run)
set -o pipefail
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
cap=${1:-200}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
for name in run1 run2; do
    python3 training/train_llama.py train --device cuda --seed 1234 --steps 1300 --layers 8 --hidden 256 \
        --heads 8 --kv-heads 2 --intermediate 704 --context 512 --batch-size 64 --lr 2e-3 --warmup 200 \
        --repeat-frac 0.3 --random-frac 0.5 --dropout 0 --export-last --time-limit "$cap" --out "/tmp/$name" 2>&1 |
        tee "$OUT/log_$name.txt"
    cp "/tmp/$name/metrics.json" "$OUT/metrics_$name.json"
done
cp -r /tmp/run1/last "$OUT/prose-llama"
sha256sum /tmp/run1/last/model.safetensors /tmp/run2/last/model.safetensors | tee "$OUT/sha256.txt"
python3 - "$OUT" <<'EOF' | tee "$OUT/compare.json"
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/metrics_{r}.json")) for r in ("run1", "run2"))
la, lb = a["train_losses"], b["train_losses"]
diff = [abs(x - y) for x, y in zip(la, lb)]
first = next((i + 1 for i, d in enumerate(diff) if d), None)
val = [abs(x["val_loss"] - y["val_loss"]) for x, y in zip(a["history"], b["history"])]
print(json.dumps({"steps": [a["steps"], b["steps"]], "complete": [a["complete"], b["complete"]],
                  "identical_train_losses": la == lb, "first_differing_step": first,
                  "max_abs_train_loss_diff": max(diff, default=0.0), "max_abs_val_loss_diff": max(val, default=0.0),
                  "wall_s": [a["wall_time_s"], b["wall_time_s"]]}, indent=1))
EOF
ls -la "$OUT" "$OUT/prose-llama"
