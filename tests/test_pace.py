"""The pace guard: the real helper, and the rule on scripted readings."""

from __future__ import annotations

from collections.abc import Iterator

from perfline.system.speed import TOLERANCE, PaceGuard, read_pace


def test_the_helper_reports_a_positive_time() -> None:
    readings = [read_pace() for _ in range(3)]
    assert all(isinstance(r, int) and r > 0 for r in readings)


def scripted(readings: list[int]) -> PaceGuard:
    values: Iterator[int] = iter(readings)
    return PaceGuard(read=lambda: next(values))


def test_slowdown_is_against_the_fastest_reading_so_far() -> None:
    guard = scripted([500, 480, 700, 490, 470])
    slowdowns = [guard.slowdown() for _ in range(5)]
    assert slowdowns[:2] == [0.0, 0.0]  # a faster reading becomes the yardstick
    assert abs(slowdowns[2] - (700 / 480 - 1)) < 1e-12 and not guard.steady(slowdowns[2])
    assert guard.steady(slowdowns[3]) and slowdowns[4] == 0.0


def test_a_spell_at_the_start_does_not_become_the_yardstick() -> None:
    guard = scripted([700, 700, 500, 700])
    slowdowns = [guard.slowdown() for _ in range(4)]
    assert slowdowns[:3] == [0.0, 0.0, 0.0] and not guard.steady(slowdowns[3])
    assert guard.steady(TOLERANCE) and not guard.steady(TOLERANCE + 0.01)
