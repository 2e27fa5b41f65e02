#!/usr/bin/env bash
# make-repo.sh DIR [COMMITS [CULPRIT [BROKEN [BROKEN_COUNT]]]]
#
# A git repository in DIR (branch main) of bench.c and its Makefile (beside this script) with COMMITS commits (default
# 64). From commit CULPRIT on (default 41) the program does 8% more work; BROKEN_COUNT
# commits (default 1) from commit BROKEN, if given, do not compile and the next one fixes
# them. Commits are numbered from 0, the subject of each is "change N", the culprit's
# "change N (more work)" or $CULPRIT_SUBJECT. CULPRIT_WORK sets the work from the culprit on
# (default 2160000UL, 8% more; CULPRIT_WORK=1850000UL is 7.5% less: an improvement).
set -euo pipefail
dir=$1 commits=${2:-64} culprit=${3:-41} broken=${4:--1} broken_count=${5:-1}
here=$(cd "$(dirname "$0")" && pwd)
git init -q -b main "$dir"
cp "$here/bench.c" "$here/Makefile" "$dir/"
for ((i = 0; i < commits; i++)); do
	if ((broken >= 0 && i >= broken && i < broken + broken_count)); then
		echo '#define WORK (' >"$dir/work.h"
	elif ((i >= culprit)); then
		echo "#define WORK ${CULPRIT_WORK:-2160000UL}" >"$dir/work.h"
	else
		echo '#define WORK 2000000UL' >"$dir/work.h"
	fi
	echo "change $i" >"$dir/NOTES"
	subject="change $i"
	if ((i == culprit)); then subject=${CULPRIT_SUBJECT:-"$subject (more work)"}; fi
	git -C "$dir" add .
	git -C "$dir" -c user.name=Dev -c user.email=dev@example.org commit -q -m "$subject"
done
