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
