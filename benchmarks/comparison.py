"""
Two envs compared run by run: ratios of paired runs, and whether two counts differ by chance.

Timings on a shared VM drift within minutes, so a benchmark alternates the envs and pairs each
run with the other env's run beside it. Time-outs are rare events (a host stall of a few ms
makes one, whichever env runs): two counts of five differ by two or three from run to run, so
a count is compared with its interval, not with the other count alone. Likewise a median of
paired ratios is given with its interval: three pairs cannot tell a 10 % difference from noise.
"""

import math
from typing import Callable


def paired_ratios(ours: list[float], theirs: list[float]) -> list[float]:
    """``ours[k] / theirs[k]`` for each pair of runs (NaN where ``theirs[k]`` is not positive)."""
    if len(ours) != len(theirs):
        raise ValueError(f'paired runs need as many of each env, got {len(ours)} and '
                         f'{len(theirs)}')
    return [a / b if b > 0 else math.nan for a, b in zip(ours, theirs)]


def binomial_cdf(successes: int, trials: int, p: float) -> float:
    """P(X <= successes) for X ~ Binomial(trials, p) (log terms: no overflow)."""
    if p <= 0.0 or p >= 1.0:
        return 1.0 if p <= 0.0 or successes >= trials else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for k in range(successes + 1):
        total += math.exp(math.lgamma(trials + 1) - math.lgamma(k + 1)
                          - math.lgamma(trials - k + 1) + k * log_p + (trials - k) * log_q)
    return min(total, 1.0)


def _solve(increasing: Callable[[float], float], target: float) -> float:
    """Return the p in [0, 1] where ``increasing(p)`` reaches ``target`` (bisection)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2.0
        if increasing(middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def binomial_interval(successes: int, trials: int, confidence: float = 0.95
                      ) -> tuple[float, float]:
    """
    Clopper-Pearson interval of a binomial proportion: exact, never narrower than it should be.

    :returns: (low, high) in [0, 1]; (0, 1) when there is no trial.
    """
    if not 0 <= successes <= trials:
        raise ValueError(f'successes must be within 0..trials ({trials}), got {successes}')
    if not 0.0 < confidence < 1.0:
        raise ValueError(f'confidence must be in (0, 1), got {confidence}')
    tail = (1.0 - confidence) / 2.0
    # low: P(X >= successes) = tail; high: P(X <= successes) = tail, i.e. P(X > it) = 1 - tail
    low = 0.0 if successes == 0 else _solve(
        lambda p: 1.0 - binomial_cdf(successes - 1, trials, p), tail)
    high = 1.0 if successes == trials else _solve(
        lambda p: 1.0 - binomial_cdf(successes, trials, p), 1.0 - tail)
    return low, high


def count_ratio_interval(ours: int, theirs: int, confidence: float = 0.95
                         ) -> tuple[float, float] | None:
    """
    Interval of the ratio of two Poisson rates, from counts over the same number of steps.

    Given the total, ``ours`` is binomial with p = rate_ours / (rate_ours + rate_theirs); the
    exact interval of p maps to the ratio p / (1 - p). An interval that holds 1 says the counts
    differ by chance as far as these runs can tell.

    :returns: (low, high), ``high`` inf when ``theirs`` is 0; None when both are 0.
    """
    if ours < 0 or theirs < 0:
        raise ValueError(f'counts must be >= 0, got {ours} and {theirs}')
    if ours + theirs == 0:
        return None
    low, high = binomial_interval(ours, ours + theirs, confidence)
    return low / (1.0 - low), (math.inf if high >= 1.0 else high / (1.0 - high))


def sign_test(differences: list[float]) -> float:
    """Two-sided sign-test p that the differences' median is 0 (zeros and NaN left out)."""
    above = sum(d > 0 for d in differences)
    trials = above + sum(d < 0 for d in differences)
    if trials == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_cdf(min(above, trials - above), trials, 0.5))


def median_interval(values: list[float], confidence: float = 0.95
                    ) -> tuple[float, float] | None:
    """
    Distribution-free interval of a median: two order statistics, as the sign test gives them.

    Each value falls below the median with probability 1/2, so ``[x_(k), x_(n+1-k)]`` of the
    n sorted values misses it with probability ``2 P(X <= k - 1)``, X ~ Binomial(n, 1/2); k is
    the largest that keeps this within ``1 - confidence``. NaN values are left out.

    :returns: (low, high); None when too few values give that confidence (fewer than 6 at 95 %).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f'confidence must be in (0, 1), got {confidence}')
    ordered = sorted(v for v in values if not math.isnan(v))
    n = len(ordered)
    k = 0
    while k + 1 <= (n + 1) // 2 and 2.0 * binomial_cdf(k, n, 0.5) <= 1.0 - confidence:
        k += 1
    return None if k == 0 else (ordered[k - 1], ordered[n - k])
