"""A number set in perfline's environment: a bad one is one line naming the variable."""

from __future__ import annotations

import pytest

from perfline.records.errors import UserError
from perfline.system.env_settings import env_number


@pytest.mark.parametrize("text", ["abc", "-1", "inf", "nan", ""])
def test_a_bad_number_names_its_variable(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFLINE_SETTLE_S", text)
    with pytest.raises(UserError, match=r"^PERFLINE_SETTLE_S='.*' must be a number of at least 0: unset it, or set "
                                        r"e\.g\. PERFLINE_SETTLE_S=5$"):
        env_number("PERFLINE_SETTLE_S", 5.0)


def test_unset_is_the_default_and_zero_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFLINE_SETTLE_S", raising=False)
    assert env_number("PERFLINE_SETTLE_S", 5.0) == 5.0
    monkeypatch.setenv("PERFLINE_SETTLE_S", "0")
    assert env_number("PERFLINE_SETTLE_S", 5.0) == 0.0
    monkeypatch.setenv("PERFLINE_SETTLE_S", "2.5")
    assert env_number("PERFLINE_SETTLE_S", 5.0) == 2.5


def test_the_fleets_timeouts_and_tolerance_are_read_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """They were read with float() at import: a bad value was a traceback in every fleet
    command, whichever setting it needed."""
    from perfline.fleet import health, kernel_jobs, stalled

    for name, read in [("PERFLINE_FLEET_STALLED_S", stalled.stalled_timeout),
                       ("PERFLINE_FLEET_BOOT_S", kernel_jobs.boot_timeout),
                       ("PERFLINE_FLEET_SPEED_TOLERANCE", lambda: health.off_class(130, [100]))]:
        monkeypatch.setenv(name, "soon")
        with pytest.raises(UserError, match=f"^{name}='soon' must be a number"):
            read()
        monkeypatch.delenv(name)
    assert stalled.stalled_timeout() == 120.0 and kernel_jobs.boot_timeout() == 3600.0
    assert health.off_class(120, [100]) is None and "+30%" in str(health.off_class(130, [100]))
    monkeypatch.setenv("PERFLINE_FLEET_SPEED_TOLERANCE", "0.5")
    assert health.off_class(130, [100]) is None
