#!/usr/bin/env bash
# `make demo`'s tracker: the 64-commit C project of examples/bisect/make-repo.sh, in which
# commit 41 makes the program do 8% more work, tracked with examples/track/demo.yaml
# (every 8th commit of the last 40): the regression is found between two tested commits,
# confirmed by an interleaved A/B of them, and bisected to its commit, on SQLite.
# demo.sh [PERFLINE]; the project lives in a scratch directory removed afterwards, the runs
# in track-demo.db in the current directory (made anew each time), the graph beside it.
set -euo pipefail
perfline=${1:-.venv/bin/perfline}
perfline=$(cd "$(dirname "$perfline")" && pwd)/$(basename "$perfline")
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/perfline-track-demo.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$here/../bisect/make-repo.sh" "$scratch/src"
cp "$here/demo.yaml" "$scratch/tracker.yaml"
out=$PWD
rm -f "$out/track-demo.db" "$out/track-demo.png" "$out/track-demo-report.html"
export PERFLINE_DB=$out/track-demo.db PERFLINE_CACHE_DIR=$scratch/cache
cd "$scratch"
"$perfline" track run tracker.yaml --once
echo
"$perfline" regressions
echo
# The report a developer gets by mail (report: mail_to in the tracker file), as text.
"$perfline" report regression 1
"$perfline" report regression 1 --format html --output "$out/track-demo-report.html"
"$perfline" track graph demo --png "$out/track-demo.png"
echo
echo "the report as one HTML file: track-demo-report.html; the daily number as a graph: track-demo.png"
echo "the dashboard on the same store: PERFLINE_DB=track-demo.db $perfline serve   (then open http://127.0.0.1:8080/)"
echo "and from the command line, e.g.:"
echo "  PERFLINE_DB=track-demo.db $perfline track status demo"
echo "  PERFLINE_DB=track-demo.db $perfline regressions --json"
