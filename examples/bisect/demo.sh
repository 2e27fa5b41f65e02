#!/usr/bin/env bash
# `make demo`'s bisection: a 64-commit C project, one commit of which makes the program do
# 8% more work, bisected with real builds and real timing (about 15 s on 2 CPUs).
# demo.sh [PERFLINE]; the project and its worktrees live in a scratch directory removed
# afterwards, the bisection in perfline's store (`perfline bisect log` shows it again).
set -euo pipefail
perfline=${1:-.venv/bin/perfline}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/perfline-bisect-demo.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$here/make-repo.sh" "$scratch/project"
good=$(git -C "$scratch/project" rev-list --max-parents=0 HEAD)
bad=$(git -C "$scratch/project" rev-parse HEAD)
# bench.c measures against itself (see its header), so the pace guard is off: on a host
# whose speed wanders for minutes it would stop the bisection for nothing.
PERFLINE_CACHE_DIR=$scratch/cache "$perfline" bisect start --repo "$scratch/project" --good "$good" --bad "$bad" \
	--build 'cc -O1 -o bench bench.c -lm' --command ./bench --direction lower --pace-tolerance off
