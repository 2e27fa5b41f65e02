"""Group-sequential boundaries by alpha spending (Lan and DeMets), found by numerical
integration.

A test looked at K times, at information fractions t_1 < ... < t_K = 1 (the share of
the largest sample it may take), errs under the null at the first look whose statistic
crosses its boundary. Bonferroni gives every look alpha/K and wastes what the looks'
correlation saves. Here each look k spends alpha(t_k) - alpha(t_{k-1}) of a spending
function alpha(t), and its boundary b_k is the value at which the chance under the null
of continuing to look k and crossing there is exactly that increment. The statistics
are taken as a standardised Brownian motion observed at the t_k: the score S_k = Z_k
sqrt(t_k) has independent normal increments of variance t_k - t_{k-1} (Armitage,
McPherson and Rowe 1969; Jennison and Turnbull 2000, ch. 19). The density of S_k on the
paths that have not crossed yet is carried from look to look on a grid and integrated
with Simpson's rule.

Spending functions, both reaching alpha at t = 1:

- O'Brien-Fleming type, 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)): almost nothing at the first
  looks, nearly the whole alpha at the last;
- Pocock type, alpha log(1 + (e - 1) t): about the same nominal level at every look,
  the one that stops a test of a large step soonest.

A t statistic with few degrees of freedom is judged at the nominal level of its look
(p below 1 - Phi(b_k)): its marginal level is then exact and the looks' correlation is
that of the means; the error that remains is measured by simulation where it is used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING

# numpy and scipy are imported in the functions that compute a boundary: `perfline`
# imports this module at start-up (`ab`'s options), where scipy.optimize cost 0.7 s of CPU.
if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]

# Grid points per standard deviation of the smallest increment between looks, and the
# lower end of every grid in standard deviations of its look: the mass below -8 sd is
# 6e-16, the boundaries found agree with published tables to the third decimal.
POINTS_PER_SD = 24
LOWEST_SD = 8.0


class Spending(StrEnum):
    OBRIEN_FLEMING = "obrien-fleming"
    POCOCK = "pocock"


def _normal_sf(x: FloatArray | float) -> FloatArray:
    import numpy as np  # numpy, scipy: only when computing
    from scipy import special

    return np.asarray(0.5 * special.erfc(np.asarray(x) / math.sqrt(2.0)))


def _normal_isf(p: float) -> float:
    from scipy import special  # scipy: only when computing

    return float(-special.ndtri(p))


def spent(kind: Spending, t: float, alpha: float) -> float:
    """The share of alpha spent by information fraction t (0 < t <= 1)."""
    if kind is Spending.OBRIEN_FLEMING:
        return float(2.0 * _normal_sf(_normal_isf(alpha / 2.0) / math.sqrt(t)))
    return alpha * math.log1p((math.e - 1.0) * t)


def _simpson_weights(m: int, h: float) -> FloatArray:
    """Simpson's rule on m (odd) equally spaced points h apart."""
    import numpy as np  # numpy: only when computing

    w = np.full(m, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    return w * h / 3.0


@dataclass(frozen=True)
class _Grid:
    """The sub-density of the score at one look over the paths that have not crossed,
    already multiplied by the integration weights."""

    s: FloatArray
    weighted: FloatArray
    t: float


def _grid(t: float, upper: float, step: float) -> tuple[FloatArray, FloatArray]:
    import numpy as np  # numpy: only when computing

    lo = -LOWEST_SD * math.sqrt(t)
    m = max(math.ceil((upper - lo) / step), 2)
    m += 1 - m % 2  # Simpson's rule needs an odd count
    s = np.linspace(lo, upper, m)
    return s, _simpson_weights(m, s[1] - s[0])


class Boundary:
    """Upper one-sided boundaries for the looks at `fractions`, spending `alpha`."""

    def __init__(self, fractions: Sequence[float], alpha: float, kind: Spending) -> None:
        import numpy as np  # numpy: only when computing

        t = [float(f) for f in fractions]
        if not t or any(b <= a for a, b in itertools.pairwise(t)) or t[0] <= 0 or abs(t[-1] - 1.0) > 1e-12:
            raise ValueError(f"information fractions must rise from above 0 to 1, got {t}")
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
        self.fractions, self.alpha, self.kind = tuple(t), alpha, kind
        increments = np.diff([0.0, *t])
        self._step = math.sqrt(float(increments.min())) / POINTS_PER_SD
        self.z: list[float] = []
        self.spent: list[float] = []
        self._grids: list[_Grid] = []  # the density before look k+1 crosses, per look k
        previous = 0.0
        for k, tk in enumerate(t):
            target = spent(kind, tk, alpha) - previous
            bound = self._solve(k, target)
            self.z.append(bound)
            self.spent.append(self._crossing(k, bound))
            previous += self.spent[-1]
            self._grids.append(self._continue(k, bound))

    def _crossing(self, k: int, z: float) -> float:
        """P(no crossing before look k, and Z_k >= z) under the null."""
        tk = self.fractions[k]
        if k == 0:
            return float(_normal_sf(z))
        before = self._grids[k - 1]
        sd = math.sqrt(tk - before.t)
        return float(before.weighted @ _normal_sf((z * math.sqrt(tk) - before.s) / sd))

    def _solve(self, k: int, target: float) -> float:
        if target <= 0.0:
            return math.inf
        from scipy import optimize  # scipy: only when computing

        return float(optimize.brentq(lambda z: self._crossing(k, z) - target, -LOWEST_SD, 40.0, xtol=1e-10))

    def _continue(self, k: int, z: float) -> _Grid:
        import numpy as np  # numpy: only when computing

        tk = self.fractions[k]
        upper = min(z, LOWEST_SD + 2.0) * math.sqrt(tk)
        s, w = _grid(tk, upper, self._step)
        if k == 0:
            density = np.exp(-0.5 * s * s / tk) / math.sqrt(2 * math.pi * tk)
        else:
            before = self._grids[k - 1]
            sd = math.sqrt(tk - before.t)
            kernel = np.exp(-0.5 * ((s[:, None] - before.s[None, :]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
            density = kernel @ before.weighted
        return _Grid(s, density * w, tk)

    @property
    def nominal(self) -> tuple[float, ...]:
        """The one-sided level each look is judged at: 1 - Phi(b_k)."""
        return tuple(float(_normal_sf(z)) for z in self.z)

@lru_cache(maxsize=64)
def boundary(fractions: tuple[float, ...], alpha: float, kind: Spending) -> Boundary:
    return Boundary(fractions, alpha, kind)


def fractions_of(looks: Sequence[int]) -> tuple[float, ...]:
    """Information fractions of looks at these sample counts (information grows with n)."""
    return tuple(n / looks[-1] for n in looks)

