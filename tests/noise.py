"""The noise of examples/bisect/bench.c set by the test instead of timed (its header says
how): tests of the tracker's and the bisection's logic (resume, ranges, budget, kills)
must give the same answer whatever this machine's speed does today. 2% per sample and a
0.5% machine offset that changes every 5 s are what bench.c's own timing shows on a quiet
day; the 8% step of make-repo.sh's culprit stands out of them in every run. Nothing is timed,
so a measurement after a build does not wait for quiet CPUs (PERFLINE_SETTLE_S=0: up to
5 s a build on a busy machine, a third of a tracked history's time)."""

SET_NOISE = {"BENCH_NOISE": "0.02", "BENCH_OFFSET": "0.005", "PERFLINE_SETTLE_S": "0"}
