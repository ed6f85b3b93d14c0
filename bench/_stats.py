"""Small helpers shared by the benchmarks: percentiles, a uniform report line, the publication they read."""

from __future__ import annotations

import statistics
from typing import Any

import httpx

# The document of the exact-version read benchmarks (bench/bus.py and bench/load.py): 3,600 characters.
BENCH_BODY = "Fund X can meet 30-day redemptions. " * 100


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
    # Three decimals where two would round a missed goal onto its target (0.999 shown as 1.00).
    shown = f"{value:8.3f}" if not met and f"{value:.2f}" == f"{target:.2f}" else f"{value:8.2f}"
    print(f"GOAL {name:<52} {shown}{unit}   goal {sign} {target:g}{unit}   {verdict}")
    return met


def publish(url: str, token: str) -> dict[str, Any]:
    """Version 1 of the publication the read benchmarks read, through the gateway."""
    r = httpx.post(
        f"{url}/v1/publications",
        json={"title": "bench", "body": BENCH_BODY},
        headers={"Authorization": f"Bearer {token}"},
    )
    r.raise_for_status()
    return dict(r.json())
