#!/usr/bin/env bash
# The GPU roles' hardware check, for a session lent the GPU machine. From the repository root:
#   OUT=/some/dir bash tests/gpu/device_check.sh
# Needs python3 with nvidia-ml-py and PyYAML; no Ansible. Writes facts.json (nvml_facts),
# h200-1.json and h100-8.json (gpu_health against a 1x H200 and an 8x H100 plan) and
# recording.json (raw NVML answers, the fixture format of tests/gpu/fixtures).
set -u
OUT=${OUT:-/tmp/gpu-device-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - > "$OUT/facts.json" <<'PYEOF'
import importlib.util
import json
import subprocess

spec = importlib.util.spec_from_file_location("nvml_facts", "plugins/modules/nvml_facts.py")
nvml_facts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nvml_facts)


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


params = {"sysfs_root": "/sys", "procfs_root": "/proc", "collect_xid": True, "xid_since": ""}
print(json.dumps(nvml_facts.gather(params, run), indent=1))
PYEOF
echo "nvml_facts: rc=$? available=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["available"], d.get("error"), len(d["gpus"]), "GPU(s)", d.get("driver_version"))' "$OUT/facts.json")"

"$PY" -m cluster_plan.gpu.health "$OUT/facts.json" --node device --model H200-SXM-141GB --count 1 \
  > "$OUT/h200-1.json"
echo "plan 1x H200-SXM-141GB: rc=$? (expect 0, verdict pass)"
"$PY" -m cluster_plan.gpu.health "$OUT/facts.json" --node device --model H100-SXM5-80GB --count 8 \
  > "$OUT/h100-8.json"
echo "plan 8x H100-SXM5-80GB: rc=$? (expect 1, verdict fail naming model and count)"
for report in h200-1 h100-8; do
  "$PY" -c 'import json,sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], "verdict:", r["verdict"])
for f in r["findings"]:
    if f["status"] != "pass":
        print("  ", f["status"], f["check"], "-", f["message"])' "$OUT/$report.json" "$report"
done

"$PY" tests/gpu/nvml_replay.py record "$OUT/recording.json" > /dev/null
echo "recording: rc=$? -> $OUT/recording.json"

# The collectives program on real CUDA, where python3 has a CUDA build of
# torch. One GPU: the all-reduce has one rank (busbw is 0 by definition, algbw is the time of
# NCCL's one-rank operation), which still runs the program's NCCL path end to end; the DDP job
# trains on the GPU through torchrun. Writes allreduce-nccl.json and train-nccl.json.
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)' 2>/dev/null; then
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), torch.cuda.device_count(), "GPU(s):", torch.cuda.get_device_name(0))'
  "$PY" -m cluster_plan.node_bundle collectives "$OUT/cluster-plan-collectives.pyz" > /dev/null
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 timeout 300 "$PY" "$OUT/cluster-plan-collectives.pyz" allreduce \
    --backend nccl --init tcp://127.0.0.1:29511 \
    --sizes 4096,65536,1048576,16777216,268435456,1073741824 > "$OUT/allreduce-nccl.json"
  echo "collectives allreduce (nccl, 1 rank): rc=$?"
  timeout 300 "$PY" -m torch.distributed.run --nnodes 1 --nproc_per_node 1 \
    --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29400 \
    "$OUT/cluster-plan-collectives.pyz" train --backend nccl --steps 60 > "$OUT/train-nccl.json"
  echo "collectives train (nccl, 1 rank, torchrun): rc=$?"
  "$PY" -c 'import json,sys
a = json.load(open(sys.argv[1])); t = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
for r in a["results"]:
    print("  allreduce %11d B: %10.1f us, algbw %8.2f GB/s" % (r["bytes"], r["time_us"], r["algbw_GBps"]))
print("  train: loss", t["first_loss"], "->", t["last_loss"], "identical weights", t["identical_weights"])' \
    "$OUT/allreduce-nccl.json" "$OUT/train-nccl.json"
else
  echo "collectives: no CUDA build of torch with NCCL in $PY; skipped"
fi
