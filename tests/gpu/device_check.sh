#!/usr/bin/env bash
# Issue 6's hardware check, for a session lent the GPU machine. From the repository root:
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
