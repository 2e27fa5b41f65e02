"""Per-run summary of a metric's samples: what `perfline show` prints beside every number."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    stddev: float
    min: float
    median: float
    max: float

    @property
    def cv_pct(self) -> float:
        """Relative standard deviation in %, the noise figure LKP prints as %stddev."""
        return 100.0 * self.stddev / abs(self.mean) if self.mean else float("nan")


def summarize(values: Sequence[float] | NDArray[np.float64]) -> Summary:
    if len(values) == 0:
        raise ValueError("cannot summarize an empty sample")
    import numpy as np  # numpy: only when summarizing (`perfline` imports this module at start-up)

    data = np.asarray(values, dtype=float)
    return Summary(
        n=len(data),
        mean=float(data.mean()),
        # Sample (n-1) stddev: repetitions estimate the noise of the benchmark.
        stddev=float(data.std(ddof=1)) if len(data) > 1 else 0.0,
        min=float(data.min()),
        median=float(np.median(data)),
        max=float(data.max()),
    )
