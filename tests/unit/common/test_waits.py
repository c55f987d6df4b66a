"""The bounded wait: past its bound, an error naming what was awaited (never an endless wait)."""

from __future__ import annotations

import pytest
import ray

from rllib_ext.common import waits


def test_a_wait_past_its_bound_names_what_it_awaited(monkeypatch):
    seen = {}

    def never_answers(refs, timeout=None):
        seen["timeout"] = timeout
        raise ray.exceptions.GetTimeoutError("timed out")

    monkeypatch.setattr(waits.ray, "get", never_answers)
    with pytest.raises(waits.WaitTimeoutError, match="no answer from the critic worker's train call within 5 s"):
        waits.get_within("ref", "the critic worker's train call", timeout_s=5)
    assert seen["timeout"] == 5


def test_an_answer_in_time_is_returned_and_the_default_bound_is_finite(monkeypatch):
    monkeypatch.setattr(waits.ray, "get", lambda refs, timeout=None: (refs, timeout))
    assert waits.get_within("ref", "x") == ("ref", waits.ACTOR_CALL_TIMEOUT_S)
    assert 0 < waits.ACTOR_CALL_TIMEOUT_S < float("inf")
