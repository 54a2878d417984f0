"""Exact paired tests, Holm and minimum detectable effects, checked against hand-computed values."""
import itertools
import math

import numpy as np
import pytest

from kgir_lib.eval.stats import _mcnemar_power, holm, mcnemar_exact, mde_mcnemar, mde_paired, sign_flip_test


def test_mcnemar_hand_computed_table():
    # 2x2 table: 1 question only A right, 5 only B right, 4 both right, 2 both wrong.
    a = [1] * 1 + [0] * 5 + [1] * 4 + [0] * 2
    b = [0] * 1 + [1] * 5 + [1] * 4 + [0] * 2
    t = mcnemar_exact(a, b)
    assert (t.b, t.c, t.discordant) == (1, 5, 6)
    # P(X <= 1), X ~ Bin(6, 1/2) = (1 + 6) / 64; two-sided: 14 / 64
    assert t.p == pytest.approx(14 / 64)


def test_mcnemar_seven_against_seventeen():
    a = [1] * 7 + [0] * 17
    b = [0] * 7 + [1] * 17
    # sum_{k<=7} C(24, k) / 2^24, doubled
    expected = 2 * sum(math.comb(24, k) for k in range(8)) / 2 ** 24
    assert mcnemar_exact(a, b).p == pytest.approx(expected)
    assert 0.06 < expected < 0.07


def test_mcnemar_accepts_percent_scale_and_no_discordance():
    assert mcnemar_exact([100, 0, 100], [0, 0, 100]).b == 1
    assert mcnemar_exact([1, 0], [1, 0]).p == 1.0
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([0.5, 1], [0, 1])


def test_sign_flip_tiny_vectors_by_hand():
    # sums of +-1 +-2 +-3: 6 4 2 0 0 -2 -4 -6; |S| >= 6 twice in 8
    assert sign_flip_test([1, 2, 3]) == pytest.approx(2 / 8)
    # zeros dropped; +-.5 +-.2 +-.4 with observed .5 - .2 + .4 = .7: |S| >= .7 for 1.1, .7, -.7, -1.1
    assert sign_flip_test([0.5, 0.0, -0.2, 0.4]) == pytest.approx(4 / 8)
    assert sign_flip_test([0, 0]) == 1.0


def test_sign_flip_exact_counts_every_sign_assignment():
    """The exact branch against the definition: every row of the 2^m sign matrix, its |sum| at least the observed
    |sum| (random differences, ties included by repeating values)."""
    rng = np.random.default_rng(7)
    for m in range(1, 11):
        d = rng.choice([-1.0, 0.5, 1 / 3, 2.0, -0.25], size=m) * rng.choice([1.0, 1.5], size=m)
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
        tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
        expected = float((np.abs(signs @ d) >= abs(d.sum()) - tol).mean())
        assert sign_flip_test(d) == pytest.approx(expected, abs=1e-12), d


def test_sign_flip_seven_in_one_direction_is_the_sign_test():
    assert sign_flip_test([0.5] * 7 + [0.0] * 93) == pytest.approx(2 / 2 ** 7)


def test_sign_flip_is_exact_up_to_exact_max_differences_and_monte_carlo_above():
    """Three differences of +1: exactly 2 of the 8 sign assignments reach |sum| 3, p = 1/4. Monte Carlo with 10
    resamples gives (1 + hits) / 11, which is never 1/4: so p = 1/4 shows the exact branch, at exact_max = 3
    (the boundary) as above it, and below it p is a multiple of 1/11."""
    assert sign_flip_test([1.0, 1.0, 1.0], n_resamples=10, exact_max=3) == 0.25
    assert sign_flip_test([1.0, 1.0, 1.0], n_resamples=10, exact_max=4) == 0.25
    mc = sign_flip_test([1.0, 1.0, 1.0], n_resamples=10, exact_max=2)
    assert mc != 0.25 and round(mc * 11, 9) == int(round(mc * 11))


def test_sign_flip_monte_carlo_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(1)
    d = rng.normal(0.1, 1.0, size=16)  # 2^16 assignments: exact in a fraction of a second; p about 0.16
    exact = sign_flip_test(d, exact_max=16)
    mc = sign_flip_test(d, exact_max=10, n_resamples=50_000, seed=3)
    assert mc == sign_flip_test(d, exact_max=10, n_resamples=50_000, seed=3)
    assert abs(mc - exact) < 0.01


def test_holm_hand_computed():
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    out = holm([0.2, float("nan"), 0.01])
    assert np.isnan(out[1]) and out[2] == pytest.approx(0.02) and out[0] == pytest.approx(0.2)
    assert holm([0.9, 0.8]).max() <= 1.0


def test_mde_mcnemar_by_hand():
    """n = 8, every question discordant: the exact two-sided test at 5 % rejects only b = 0 or b = 8, so its power
    at an EM difference k/8 is pi^8 + (1 - pi)^8 with pi = 1/2 + k/16; k = 7 gives 0.9375^8 = 0.597 < 0.8, k = 8
    gives 1: the MDE is the whole 8/8."""
    assert mde_mcnemar(8, 1.0) == 1.0


def test_mde_mcnemar_monotone_and_bounded():
    small, large = mde_mcnemar(100, 0.3), mde_mcnemar(1000, 0.3)
    assert (small, large) == (0.16, 0.05)  # pinned: a change to the power computation shows here
    assert 0 < large < small <= 0.3
    assert small * 100 == pytest.approx(round(small * 100))  # a multiple of 1/n
    assert mde_mcnemar(20, 0.05) == float("inf")  # one discordant question cannot reach 80 % power


def test_mcnemar_power_is_the_rejection_chance_summed_over_the_discordant_count():
    """The power from its definition, term by term: D ~ Binomial(n, discordance) discordant questions, each
    favouring the first method with probability pi; the test rejects at b <= lo or b >= D - lo, lo the largest b
    with 2 P(Bin(D, 1/2) <= b) <= alpha."""
    for n, disc, k, alpha in [(30, 0.4, 6, 0.05), (84, 0.25, 9, 0.0125), (12, 1.0, 5, 0.05)]:
        pi = 0.5 + (k / n) / (2 * disc)
        power = 0.0
        for D in range(1, n + 1):
            rejecting = [b for b in range(D + 1)
                         if 2 * sum(math.comb(D, j) for j in range(b + 1)) / 2 ** D <= alpha]
            if not rejecting:
                continue
            lo = max(rejecting)
            hits = [b for b in range(D + 1) if b <= lo or b >= D - lo]
            p_reject = sum(math.comb(D, b) * pi ** b * (1 - pi) ** (D - b) for b in hits)
            power += math.comb(n, D) * disc ** D * (1 - disc) ** (n - D) * p_reject
        assert _mcnemar_power(n, disc, k / n, alpha) == pytest.approx(power, rel=1e-9, abs=1e-12)


def test_mde_paired_normal_formula():
    assert mde_paired(10.0, 100) == pytest.approx((1.959964 + 0.841621) * 10.0 / 10.0, rel=1e-5)
    assert mde_paired(1.0, 0) == float("inf")


def test_mde_paired_without_any_difference_is_infinite_not_zero():
    """All per-question differences zero: no power from this spread, so no effect is detectable (not 0)."""
    assert mde_paired(0.0, 84) == float("inf")
    assert mde_paired(float("nan"), 1) == float("inf")


def test_holm_reads_none_as_a_missing_p():
    assert holm([0.01, None, 0.04]).tolist()[::2] == [0.02, 0.04] and np.isnan(holm([0.01, None, 0.04])[1])


def test_mde_paired_of_one_question_and_of_a_small_spread():
    """(z_0.975 + z_0.8) sd / sqrt(n) = 2.8016 sd / sqrt(n): finite for one question and for sd below 1."""
    assert mde_paired(10.0, 1) == pytest.approx(28.016, abs=1e-3)
    assert mde_paired(0.5, 4) == pytest.approx(0.7004, abs=1e-4)


def test_sign_flip_monte_carlo_counts_ties_and_the_observed_assignment():
    # one non-zero difference: every random assignment ties the observed |sum|, so hits = n_resamples and
    # p = (1 + n) / (1 + n) = 1 for any seed; a miscounted tie or an off-by-one in the +1 correction shows here
    assert sign_flip_test([2.5, 0.0, 0.0], n_resamples=10, exact_max=0) == 1.0
    assert sign_flip_test([-1.0], n_resamples=25_000, exact_max=0, seed=7) == 1.0


def test_sign_flip_default_seed_is_zero():
    d = [1.0, 1.0, 1.0, -1.0, 1.0]
    assert sign_flip_test(d, n_resamples=50, exact_max=2) == sign_flip_test(d, n_resamples=50, exact_max=2, seed=0)
    assert sign_flip_test(d, n_resamples=50, exact_max=2) != sign_flip_test(d, n_resamples=50, exact_max=2, seed=1)


def test_bad_input_errors_name_the_argument_and_the_problem():
    with pytest.raises(ValueError, match=r"^mcnemar_exact: a and b differ in shape, \(2,\) and \(3,\)$"):
        mcnemar_exact([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match=r"^a must hold 0/1 scores \(EM as 0 or 1\), got values \[0\.0, 0\.5\]$"):
        mcnemar_exact([0.5, 0], [0, 1])
    with pytest.raises(ValueError, match=r"^b must hold 0/1 scores"):
        mcnemar_exact([0, 1], [0.5, 0])
    with pytest.raises(ValueError, match=r"^sign_flip_test: d must be 1-D, got shape \(1, 2\)$"):
        sign_flip_test([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"^sign_flip_test: NaN differences \(a metric not defined for some "
                                         r"question\)$"):
        sign_flip_test([1.0, float("nan")])


def brute_force_mcnemar_power(n: int, discordance: float, delta: float, alpha: float) -> float:
    """The exact McNemar test's power by enumerating every outcome (b questions only the first method gets right,
    c only the second): P(b, c) is trinomial with shares (discordance ± delta) / 2; reject when
    min(1, 2 P(X <= min(b, c))) <= alpha, X ~ Binomial(b + c, 1/2)."""
    pb, pc = (discordance + delta) / 2, (discordance - delta) / 2
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            prob = (math.comb(n, b) * math.comb(n - b, c) * pb ** b * pc ** c * (1 - discordance) ** (n - b - c))
            m = b + c
            p = 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, k) for k in range(min(b, c) + 1)) / 2 ** m)
            total += prob * (p <= alpha)
    return total


@pytest.mark.parametrize("n, discordance, delta, alpha", [(20, 0.5, 0.3, 0.05), (30, 0.4, 0.2, 0.05 / 6),
                                                          (12, 1.0, 0.5, 0.05), (25, 0.2, 0.2, 0.05)])
def test_mcnemar_power_equals_the_enumeration_of_every_outcome(n, discordance, delta, alpha):
    assert _mcnemar_power(n, discordance, delta, alpha) == pytest.approx(
        brute_force_mcnemar_power(n, discordance, delta, alpha), abs=1e-9)


def test_mcnemar_power_is_zero_without_discordance_or_beyond_it():
    assert _mcnemar_power(20, 0.0, 0.0, 0.05) == 0.0
    assert _mcnemar_power(20, 0.2, 0.3, 0.05) == 0.0  # a difference larger than the discordant share


def test_mde_mcnemar_is_the_smallest_difference_the_enumeration_detects():
    n, disc, alpha = 30, 0.4, 0.05
    expected = next(k / n for k in range(1, 13) if brute_force_mcnemar_power(n, disc, k / n, alpha) >= 0.8)
    assert mde_mcnemar(n, disc, alpha) == expected
    with pytest.raises(ValueError, match=r"^mde_mcnemar: need n >= 1 and 0 <= discordance <= 1, got 10, 1\.5$"):
        mde_mcnemar(10, 1.5)
    with pytest.raises(ValueError, match=r"got 0, 0\.5$"):
        mde_mcnemar(0, 0.5)
