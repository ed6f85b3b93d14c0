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
