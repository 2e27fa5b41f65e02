"""The pace guard: the real helper, and the rule on scripted readings and a scripted clock."""

from __future__ import annotations

from collections.abc import Iterator

from perfline.system.speed import MAX_ALLOWED, TOLERANCE, WINDOW_S, PaceGuard, read_pace


def test_the_helper_reports_a_positive_time() -> None:
    readings = [read_pace() for _ in range(3)]
    assert all(isinstance(r, int) and r > 0 for r in readings)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scripted(readings: list[int], clock: Clock | None = None) -> PaceGuard:
    values: Iterator[int] = iter(readings)
    return PaceGuard(read=lambda: next(values), clock=clock or Clock())


def test_a_spell_stands_out_of_the_recent_pace() -> None:
    guard = scripted([500, 505, 495, 500, 700, 502])
    slowdowns = [guard.slowdown() for _ in range(6)]
    assert all(guard.steady(s) for s in slowdowns[:4])
    assert abs(slowdowns[4] - (700 / 500 - 1)) < 1e-12 and not guard.steady(slowdowns[4])
    assert guard.steady(slowdowns[5])
    assert guard.allowed() == TOLERANCE  # a steady machine: the tolerance itself


def test_a_spell_at_the_start_does_not_become_the_yardstick() -> None:
    guard = scripted([700, 500, 500, 500, 700])
    slowdowns = [guard.slowdown() for _ in range(5)]
    assert guard.reference() == 500 and not guard.steady(slowdowns[4])


def test_the_yardstick_follows_a_machine_that_stays_slower() -> None:
    """500 µs for a while, then 650 for good (the host slowed down for minutes): the first
    slow readings are unsteady, and once they are most of the window they are the pace."""
    clock = Clock()
    guard = scripted([500] * 10 + [650] * 30, clock)
    steady = []
    for _ in range(40):
        clock.now += 2.0
        steady.append(guard.steady(guard.slowdown()))
    assert all(steady[:10]) and not steady[10]
    first_again = steady.index(True, 10)
    assert first_again <= 25 and all(steady[first_again:])


def test_old_readings_leave_the_window() -> None:
    clock = Clock()
    guard = scripted([400] * 5 + [600] * 3, clock)
    for _ in range(5):
        guard.slowdown()
    clock.now += WINDOW_S + 1  # a long sample: the fast readings are history
    assert [guard.steady(guard.slowdown()) for _ in range(3)] == [False, True, True]
    assert guard.reference() == 600


def test_a_wandering_pace_widens_the_tolerance_up_to_its_cap() -> None:
    wandering = [480, 620, 540, 700, 510, 660, 590, 800, 500, 640, 560, 720]
    guard = scripted([*wandering, 5000])
    for _ in wandering:
        guard.slowdown()
    assert TOLERANCE < guard.allowed() <= MAX_ALLOWED
    assert guard.steady(700 / guard.reference() - 1)
    assert not guard.steady(guard.slowdown())  # 5000 µs is never steady
