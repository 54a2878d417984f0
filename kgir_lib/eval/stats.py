"""Exact paired tests, Holm's adjustment and minimum detectable effects for reading the paper's claims.

Two methods answer the same questions, so every comparison is paired by question:

- **EM** (0/1 per question): the exact McNemar test, :func:`mcnemar_exact`. Only the *discordant*
  questions (one method right, the other wrong) carry information; under "no difference" each
  discordant question favours either method with probability 1/2, so the count favouring one of them is
  Binomial(b + c, 1/2). Two-sided p = min(1, 2 P(X <= min(b, c))).
- **F1 and Recall@k** (continuous per question): the paired sign-flip permutation test,
  :func:`sign_flip_test`. Under "no difference" the sign of each per-question difference is a fair coin;
  the p-value is the share of sign assignments whose |sum| is at least the observed |sum|. Exact
  enumeration of all 2^m assignments of the m non-zero differences when m <= ``exact_max`` (20), else a
  Monte Carlo estimate from ``n_resamples`` random assignments, p = (1 + hits) / (1 + n_resamples), which
  is a valid (slightly conservative) permutation p-value.
- **Families**: each paper claim is tested on several datasets and metrics. :func:`holm` adjusts the
  p-values of one family (Holm's step-down, valid under any dependence between the tests).
- **Minimum detectable effect** (:func:`mde_mcnemar`, :func:`mde_paired`): the smallest true difference a
  run of this size detects with the given power, so a reader can tell "no effect" from "too few questions".

The percentile bootstrap (:mod:`kgir_lib.eval.bootstrap`) stays as the effect size's interval; it is not used
for the verdict, because it overstates sparse differences (seven differing questions, all in one
direction, give a bootstrap interval that excludes 0 at any level, while the exact p is 2/2^7 = 0.016).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

EXACT_MAX = 20
N_RESAMPLES = 100_000


@dataclass(frozen=True)
class McNemar:
    """An exact McNemar test: ``b`` questions only the first method got right, ``c`` only the second."""

    b: int
    c: int
    p: float

    @property
    def discordant(self) -> int:
        return self.b + self.c


def _binary(x: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold 0/1 scores (EM as 0 or 1), got values {sorted(set(arr.tolist()))[:5]}")
    return arr


def mcnemar_exact(a: ArrayLike, b: ArrayLike) -> McNemar:
    """Exact two-sided McNemar test of paired 0/1 scores ``a[i]``, ``b[i]`` (EM of two methods on question i).

    EM may be given as 0/1 or 0/100. p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); p = 1 when
    no question is discordant.
    """
    from scipy.stats import binom  # (here: scipy.stats takes a second to import)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"mcnemar_exact: a and b differ in shape, {a.shape} and {b.shape}")
    scale = 100.0 if max(a.max(initial=0), b.max(initial=0)) > 1 else 1.0
    a, b = _binary(a / scale, "a"), _binary(b / scale, "b")
    only_a = int(((a == 1) & (b == 0)).sum())
    only_b = int(((a == 0) & (b == 1)).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else min(1.0, 2.0 * float(binom.cdf(min(only_a, only_b), n, 0.5)))
    return McNemar(only_a, only_b, p)


def _signed_sums(d: np.ndarray) -> np.ndarray:
    """All 2^m sums of ``d`` with each element's sign chosen freely, built one element at a time (the m-by-2^m
    sign matrix is never made)."""
    sums = np.zeros(1)
    for x in d:
        sums = np.concatenate((sums + x, sums - x))
    return sums


def sign_flip_test(d: ArrayLike, n_resamples: int = N_RESAMPLES, seed: int = 0,
                   exact_max: int = EXACT_MAX) -> float:
    """Two-sided paired sign-flip permutation p-value of the per-question differences ``d`` (module docstring).

    Zero differences are dropped (their sign changes nothing). Exact over all 2^m sign assignments when
    the m non-zero differences are at most ``exact_max``; otherwise ``n_resamples`` random assignments
    (``numpy.random.default_rng(seed)``), p = (1 + hits) / (1 + n_resamples). p = 1 when every d is 0.
    """
    d = np.asarray(d, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"sign_flip_test: d must be 1-D, got shape {d.shape}")
    if np.isnan(d).any():
        raise ValueError("sign_flip_test: NaN differences (a metric not defined for some question)")
    d = d[d != 0]
    m = d.size
    if m == 0:
        return 1.0
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if m <= exact_max:
        return float((np.abs(_signed_sums(d)) >= observed - tol).sum() / 2.0 ** m)
    rng = np.random.default_rng(seed)
    hits, left = 0, n_resamples
    while left:  # in chunks, so memory stays small at n = 1000 questions
        size = min(left, 10_000)
        signs = rng.choice((1.0, -1.0), size=(size, m))
        hits += int((np.abs(signs @ d) >= observed - tol).sum())
        left -= size
    return float((1 + hits) / (1 + n_resamples))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family, in input order; NaN entries stay NaN and do not
    count towards the family's size. Adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    running = 0.0
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


@functools.lru_cache(maxsize=None)
def _mcnemar_rejection_bound(discordant: int, alpha: float) -> int:
    """The largest b at which the exact two-sided McNemar test rejects among ``discordant`` discordant
    questions at level ``alpha`` (it rejects when b <= bound or b >= discordant - bound); -1 when no b does."""
    from scipy.stats import binom  # (here: scipy.stats takes a second to import)
    ks = np.arange(discordant + 1)
    crit = ks[2.0 * binom.cdf(ks, discordant, 0.5) <= alpha]
    return int(crit.max()) if crit.size else -1


def _mcnemar_power(n: int, discordance: float, delta: float, alpha: float) -> float:
    """Power of the exact two-sided McNemar test at level ``alpha`` with ``n`` questions, a share
    ``discordance`` of discordant questions and a true EM difference ``delta`` (fractions): the chance of
    rejecting, summed over the number of discordant questions D ~ Binomial(n, discordance)."""
    from scipy.stats import binom  # (here: scipy.stats takes a second to import)
    if discordance <= 0 or delta > discordance:
        return 0.0
    pi = 0.5 + delta / (2.0 * discordance)  # P(a discordant question favours the first method)
    D = np.arange(n + 1)
    weights = binom.pmf(D, n, discordance)
    bounds = np.array([_mcnemar_rejection_bound(int(d), alpha) for d in D])
    used = (D > 0) & (weights >= 1e-12) & (bounds >= 0)
    d, lo = D[used], bounds[used]
    reject = binom.cdf(lo, d, pi) + binom.sf(d - lo - 1, d, pi)
    power = 0.0
    for w, r in zip(weights[used], reject):
        power += w * r
    return float(power)


def mde_mcnemar(n: int, discordance: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest EM difference (a fraction of questions, a multiple of 1/n) that the exact McNemar test
    detects with probability ``power`` at level ``alpha``, for ``n`` questions of which a share
    ``discordance`` is discordant (the run's observed rate). ``inf`` when no difference up to the
    discordance rate reaches that power (too few discordant questions)."""
    if n < 1 or not 0 <= discordance <= 1:
        raise ValueError(f"mde_mcnemar: need n >= 1 and 0 <= discordance <= 1, got {n}, {discordance}")
    for k in range(1, int(np.floor(discordance * n + 1e-9)) + 1):
        if _mcnemar_power(n, discordance, k / n, alpha) >= power:
            return k / n
    return float("inf")


def mde_paired(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean difference a paired test detects with probability ``power`` at level ``alpha``:
    (z_{1-alpha/2} + z_power) sd / sqrt(n), ``sd`` the standard deviation of the per-question differences.
    A normal approximation of the sign-flip test's power (F1, recall); ``inf`` without questions, and when
    no per-question difference is non-zero (``sd`` 0 or undefined): the sign-flip test then has no
    discordant question to work with, as the exact McNemar test has none at zero discordance."""
    from scipy.stats import norm  # (here: scipy.stats takes a second to import)
    if n < 1 or not np.isfinite(sd) or sd <= 0:
        return float("inf")
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / np.sqrt(n))
