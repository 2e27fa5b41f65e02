#!/bin/sh
# Separate venvs for the change-point baselines that cannot live in perfline's venv:
# apache-otava pins numpy 2.2 and scipy < 1.17, signal-processing-algorithms needs
# numpy < 2. bench/changepoint_eval.py looks for them here by default.
# ruptures has no such pins: `pip install -e .[eval]` puts it into .venv itself.
set -eu
cd "$(dirname "$0")/.."
python=${PYTHON:-python3.11}
for spec in "otava apache-otava==0.8.0" "edivisive signal-processing-algorithms==2.1.6"; do
    set -- $spec
    "$python" -m venv ".venv/eval/$1"
    ".venv/eval/$1/bin/pip" install --quiet "$2"
done
