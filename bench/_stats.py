"""Small helpers shared by the benchmarks: percentiles and a uniform report line."""

from __future__ import annotations

import statistics


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(samples_ms: list[float]) -> tuple[float, float]:
    return statistics.median(samples_ms), percentile(samples_ms, 99)


def report(name: str, samples_ms: list[float]) -> tuple[float, float]:
    median, p99 = summary(samples_ms)
    print(f"{name:<48} n={len(samples_ms):>5}  median={median:8.3f} ms  p99={p99:8.3f} ms")
    return median, p99


def goal(name: str, value: float, target: float, *, at_most: bool, unit: str = "x") -> bool:
    """One goal line of the issue: the measured value, its goal, and whether this run met it."""
    met = value <= target if at_most else value >= target
    sign = "≤" if at_most else "≥"
    verdict = "met" if met else "MISSED"
    print(f"GOAL {name:<52} {value:8.2f}{unit}   goal {sign} {target:g}{unit}   {verdict}")
    return met
