"""The change-point detector's inner loops in C (native/lib/changepoint.c), through ctypes.

Reading points given as lists of floats, the order of all samples, a segment's picking,
mid-ranks and scan (one pass where numpy made eight, each of a few microseconds' fixed
cost), the Hodges–Lehmann order statistics (selected in the sorted matrix of
differences without forming it, where numpy partitioned all n1 × n2 of them), a test's
decision by its bounds and its p-value by the tail sums (where Python's scalar arithmetic
and lists were most of a test's time), the splits' reach and the autocorrelation
estimates' sums. Each returns what the numpy and Python code did, the tail sums to their
last bits (docs/statistics.md, "Complexity").
The library is built by `make native`; where it is missing, the first detection raises
ToolMissing saying so, as the native programs do.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from perfline.system.native import native_library

_POINTER = ctypes.c_void_p
_LONG = ctypes.c_long
_BYTE = ctypes.c_char
# A few doubles that many calls read (a tester's or a segment length's constants): a
# ctypes array is handed to C as it is, where a numpy array's address took a Python call.
Doubles = ctypes.Array[ctypes.c_double]


def doubles(values: Sequence[float]) -> Doubles:
    """`values` as a ctypes array of doubles."""
    return (ctypes.c_double * len(values))(*values)


def _address(array: NDArray[np.generic]) -> int:
    """Where a contiguous array's data start (0 if it has none): for a writable one in a
    third of the time of `array.ctypes.data`, which a scan asked for four times."""
    if not array.nbytes:
        return 0
    try:
        return ctypes.addressof(_BYTE.from_buffer(array))  # type: ignore[arg-type]  # (ndarray exports a buffer)
    except TypeError:  # read-only
        return int(array.ctypes.data)


class RankScan(NamedTuple):
    """A segment's samples in order, their doubled, centred mid-ranks and, for equal
    counts, the segment's scan."""

    order: NDArray[np.intp]  # the samples (offsets from the first) in ascending order of their values
    in_place: NDArray[np.int64]  # twice each sample's mid-rank less size + 1, in the samples' order
    scores: NDArray[np.int64] | None  # each point's sum of them (None: unequal counts)
    z: float  # largest |partial sum| / its spread over the splits
    best: int  # the split (points before it) where it is
    energy: float  # sum of the squared scores


@functools.cache
def _library() -> ctypes.PyDLL:
    # PyDLL: the calls keep the interpreter's lock, which reading Python lists needs and
    # calls of microseconds are better off without releasing and taking again.
    library = ctypes.PyDLL(str(native_library("changepoint")))
    library.cp_read_points.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_ssize_t, _POINTER]
    library.cp_read_points.restype = ctypes.c_int
    library.cp_rank_scan.argtypes = [_POINTER, _LONG, _LONG, _LONG, _POINTER, _LONG, _LONG, _POINTER,
                                     _POINTER, _POINTER, _POINTER, _POINTER]
    library.cp_rank_scan.restype = _LONG
    library.cp_difference_quantiles.argtypes = [_POINTER, _LONG, _POINTER, _LONG, _POINTER, _LONG, _POINTER]
    library.cp_difference_quantiles.restype = ctypes.c_int
    library.cp_any_ties.argtypes = [_POINTER, _POINTER, _LONG]
    library.cp_any_ties.restype = ctypes.c_int
    library.cp_difference_sums.argtypes = [_POINTER, _LONG, _POINTER]
    library.cp_difference_sums.restype = None
    library.cp_residual_sums.argtypes = [_POINTER, _LONG, _POINTER, _LONG, _POINTER]
    library.cp_residual_sums.restype = None
    library.cp_tail_bound.argtypes = [_POINTER, _POINTER]
    library.cp_tail_bound.restype = ctypes.c_double
    library.cp_decide.argtypes = [ctypes.c_double, _POINTER, _POINTER]
    library.cp_decide.restype = ctypes.c_int
    library.cp_log_tail.argtypes = [ctypes.c_double, _POINTER, _POINTER, _POINTER, _POINTER, _LONG, _POINTER]
    library.cp_log_tail.restype = ctypes.c_double
    library.cp_order_keys.argtypes = [_POINTER, _LONG, ctypes.c_int, _POINTER]
    library.cp_order_keys.restype = None
    library.cp_keys_to_order.argtypes = [_POINTER, _LONG, ctypes.c_int]
    library.cp_keys_to_order.restype = ctypes.c_int
    library.cp_reach.argtypes = [_POINTER, _LONG, _LONG, ctypes.c_double, _POINTER, _POINTER, _POINTER, _LONG,
                                 _POINTER, _POINTER, _LONG, _POINTER, _POINTER, _LONG]
    library.cp_reach.restype = None
    return library


def read_points(points: object, repetitions: int) -> NDArray[np.float64] | None:
    """The values of `points` if it is a list of lists of `repetitions` floats each, point
    after point; None if it is anything else."""
    if not isinstance(points, list):
        return None
    out = np.empty(len(points) * repetitions)
    return out if _library().cp_read_points(points, len(points), repetitions, _address(out)) == 0 else None


def rank_scan(
    outer: NDArray[np.intp],
    shift: int,
    size: int,
    values: NDArray[np.float64] | None,
    repetitions: int,
    spread: NDArray[np.float64] | None,
) -> RankScan:
    """The rank scan of a segment of `size` samples.

    `outer` is the order of the samples of a segment around it (or its own), whose first
    sample is `shift` before this one's; `values` the segment's samples where any two of
    the series are equal (else None: no mid-ranks needed); `repetitions` the count of
    every point (0 when they differ: only the order and ranks are worked out); `spread`
    the splits' spreads (_split_spread).
    """
    m = size // repetitions if repetitions else 0
    # One buffer for every output (each array handed to C costs microseconds): the order
    # (a spare place for the C loop) and the ranks in place, the points' scores (more
    # than one sample a point: else they are the ranks), three doubles of results.
    ranks_at = size + 1
    scores_at = ranks_at if repetitions == 1 else 2 * size + 1
    results_at = 2 * size + 1 + (m if repetitions > 1 else 0)
    buffer = np.empty(results_at + 3, dtype=np.int64)
    address, source = _address(buffer), _address(outer)
    given = shift == 0 and len(outer) == size
    order = outer if given else buffer[:size]
    picked = _library().cp_rank_scan(
        source, len(outer), shift, size, None if values is None else _address(values), repetitions, m,
        None if spread is None else _address(spread), source if given else address,
        address + 8 * ranks_at, address + 8 * scores_at, address + 8 * results_at)
    assert picked == size, "an order without every sample of the segment"
    in_place = buffer[ranks_at : ranks_at + size]
    if not repetitions:
        return RankScan(order, in_place, None, 0.0, 0, 0.0)
    z, best, energy = buffer[results_at:].view(np.float64).tolist()
    return RankScan(order, in_place, buffer[scores_at : scores_at + m], z, int(best), energy)


def difference_quantiles(
    before: NDArray[np.float64], after: NDArray[np.float64], ranks: Sequence[int]
) -> list[float]:
    """The order statistics (ranks from 0) of all after - before differences."""
    before = np.ascontiguousarray(before, dtype=np.float64)
    after = np.ascontiguousarray(after, dtype=np.float64)
    out = (ctypes.c_double * len(ranks))()
    if _library().cp_difference_quantiles(_address(before), len(before), _address(after), len(after),
                                          (_LONG * len(ranks))(*ranks), len(ranks), out):
        raise MemoryError("the Hodges–Lehmann differences' order statistics")
    return out[:]


def distinct_order(values: NDArray[np.float64]) -> NDArray[np.intp] | None:
    """The order of `values` if no two are close to equal (None otherwise: maybe tied),
    by an integer sort of keys that hold each value's bits and its index (cp_order_keys)."""
    n = len(values)
    shift = max(1, (n - 1).bit_length())
    keys = np.empty(n, dtype=np.int64)
    _library().cp_order_keys(_address(values), n, shift, _address(keys))
    keys.sort()
    return None if _library().cp_keys_to_order(_address(keys), n, shift) else keys


def any_ties(values: NDArray[np.float64], order: NDArray[np.intp]) -> bool:
    """Whether two of `values` are equal, given their ascending `order`."""
    return bool(_library().cp_any_ties(_address(values), _address(order), len(values)))


def difference_sums(x: NDArray[np.float64]) -> tuple[float, float]:
    """The sums of the squared lag-1 and lag-2 differences of x."""
    sums = np.empty(2)
    _library().cp_difference_sums(_address(x), len(x), _address(sums))
    first, second = sums.tolist()
    return first, second


def residual_sums(x: NDArray[np.float64], splits: Sequence[int]) -> tuple[float, float]:
    """The residuals of x around the means of its segments (split before each of
    `splits`, ascending): their sum of squares and the sum of the products of neighbours."""
    ends = np.array([*splits, len(x)], dtype=np.int64)
    sums = np.empty(2)
    _library().cp_residual_sums(_address(x), len(x), _address(ends), len(ends), _address(sums))
    first, second = sums.tolist()
    return first, second


def tail_bound(tester: Doubles, layout: Doubles) -> float:
    """A |z| beyond which a segment's p-value is below the level (inf if none is known).
    `tester` and `layout` are the constants of a _Tester and of a segment length's
    _SplitLayout, laid out as cp_tail_bound reads them."""
    return float(_library().cp_tail_bound(tester, layout))


def decide(z: float, tester: Doubles, layout: Doubles) -> int:
    """-1 if a bound puts the p-value of |z| at the level, 1 if one puts it below, 0 if
    only the tail sum can tell (cp_decide)."""
    return int(_library().cp_decide(z, tester, layout))


def log_tail(
    z: float,
    tester: Doubles,
    scales: NDArray[np.float64],
    weights: NDArray[np.float64],
    reach: NDArray[np.float64],
    tails: Doubles,
) -> float:
    """The log p-value of |z| by Siegmund's tail approximation over a segment's terms,
    averaged over the nodes of rho's error, whose log(weight * p) go into `tails`
    (cp_log_tail)."""
    return float(_library().cp_log_tail(z, tester, _address(scales), _address(weights), _address(reach), len(scales),
                                        tails))


def reach(
    ends: NDArray[np.float64],
    edge: int,
    spread: float,
    bound_spread: NDArray[np.float64],
    near: tuple[NDArray[np.intp], NDArray[np.intp]],
    far: tuple[NDArray[np.intp], NDArray[np.intp]],
    terms: int,
) -> NDArray[np.float64]:
    """The reach of each of `terms` terms: infinite but near the ends (see cp_reach in
    native/lib/changepoint.c). `ends` are the scores in ascending order, or only the
    `edge` smallest and largest; `near` and `far` the terms and the bounds they take."""
    bounds = np.empty(edge)
    out = np.empty(terms)
    _library().cp_reach(_address(ends), len(ends), edge, spread, _address(bound_spread), _address(near[0]),
                        _address(near[1]), len(near[0]), _address(far[0]), _address(far[1]), len(far[0]),
                        _address(bounds), _address(out), terms)
    return out
