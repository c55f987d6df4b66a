"""The transition buffer: FIFO wrap-around, state round trip, errors, a subset of fields; the
prefetching chunk reader of a replay actor (Ray stubbed)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from rllib_ext.common import waits
from rllib_ext.common.offpolicy.transitions import TransitionBuffer, sample_chunks
from tests.replay_data import transition_rows


def test_buffer_wraps_around_fifo():
    buf = TransitionBuffer(5, 2, 1, seed=0)
    assert buf.add(*transition_rows(0, 3)) == 3
    assert buf.add(*transition_rows(3, 4)) == 5 and len(buf) == buf.size() == 5 and buf.num_added == 7
    assert sorted(buf.get_state()["data"]["rewards"]) == [2, 3, 4, 5, 6]
    np.testing.assert_array_equal(buf.get_state()["data"]["rewards"], [2, 3, 4, 5, 6])  # oldest first
    buf.add(*transition_rows(10, 12))  # n > capacity: the newest 5 remain
    np.testing.assert_array_equal(buf.get_state()["data"]["rewards"], [17, 18, 19, 20, 21])
    assert buf.num_added == 19
    s = buf.sample(8, num_batches=3)
    assert s["obs"].shape == (3, 8, 2) and s["actions"].shape == (3, 8, 1) and s["rewards"].shape == (3, 8)
    assert s["terminateds"].shape == (3, 8) and all(v.dtype == np.float32 for v in s.values())
    np.testing.assert_array_equal(s["obs"][..., 0], s["rewards"])  # rows stay together
    np.testing.assert_array_equal(s["next_obs"][..., 0], s["rewards"] + 0.5)
    np.testing.assert_array_equal(s["terminateds"], (s["rewards"] % 2 == 0))
    assert set(np.unique(s["rewards"])) <= {17, 18, 19, 20, 21}


def test_buffer_state_round_trip():
    buf = TransitionBuffer(6, 2, 1, seed=1)
    buf.add(*transition_rows(0, 9))
    other = TransitionBuffer(6, 2, 1, seed=2)
    other.set_state(buf.get_state())
    assert len(other) == 6 and other.num_added == 9
    for k, v in buf.get_state()["data"].items():
        np.testing.assert_array_equal(v, other.get_state()["data"][k])
    a, b = buf.sample(4, 2), other.sample(4, 2)  # the sampler's RNG travels too
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    buf.add(*transition_rows(20, 1)), other.add(*transition_rows(20, 1))
    np.testing.assert_array_equal(buf.get_state()["data"]["rewards"], other.get_state()["data"]["rewards"])


def test_buffer_errors():
    with pytest.raises(ValueError, match="capacity"):
        TransitionBuffer(0, 2, 1)
    with pytest.raises(ValueError, match="obs_dim"):
        TransitionBuffer(5, 2.5, 1)
    buf = TransitionBuffer(5, 2, 1)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(2)
    with pytest.raises(ValueError, match="`actions` has shape"):
        buf.add(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(3), np.zeros((3, 2)), np.zeros(3))
    buf.add(*transition_rows(0, 2))
    with pytest.raises(ValueError, match="batch_size"):
        buf.sample(0)
    with pytest.raises(ValueError, match="fields"):
        buf.sample(2, fields=("observations",))
    with pytest.raises(ValueError, match="obs_dim"):
        TransitionBuffer(5, 3, 1).set_state(buf.get_state())


def test_a_subset_of_fields_is_the_same_draw():
    """``fields=("obs",)`` (an actor step's) returns those rows of the draw all fields would give, and
    advances the sampler as that draw does."""
    a, b = TransitionBuffer(50, 2, 1, seed=3), TransitionBuffer(50, 2, 1, seed=3)
    a.add(*transition_rows(0, 40)), b.add(*transition_rows(0, 40))
    for _ in range(2):
        full, obs = a.sample(8, num_batches=2), b.sample(8, num_batches=2, fields=("obs",))
        assert list(obs) == ["obs"]
        np.testing.assert_array_equal(full["obs"], obs["obs"])


class _RecordingReplay:
    """A replay actor stand-in: ``sample.remote`` records its arguments and returns a fake ref."""

    def __init__(self, events):
        self.events = events
        self.sample = types.SimpleNamespace(remote=self._sample)

    def _sample(self, batch_size, num_batches, fields):
        self.events.append(("call", num_batches, fields))
        return {"obs": np.full((num_batches, batch_size, 2), len(self.events), np.float32)}


def test_sample_chunks_keeps_the_next_call_in_flight_and_asks_for_exactly_the_steps(monkeypatch):
    events = []
    monkeypatch.setattr(waits.ray, "get", lambda ref, timeout=None: ref)  # replay calls answer at once
    chunks = sample_chunks(_RecordingReplay(events), 4, 120, 50, ("obs",))
    sizes = []
    for n, data in chunks:
        events.append(("train", n))
        assert data["obs"].shape == (n, 4, 2) and data["obs"].flags.writeable
        sizes.append(n)
    assert sizes == [50, 50, 20]
    # Chunk i + 1 is asked for before chunk i is trained on; nothing past the 120 steps.
    assert events == [
        ("call", 50, ("obs",)),
        ("call", 50, ("obs",)),
        ("train", 50),
        ("call", 20, ("obs",)),
        ("train", 50),
        ("train", 20),
    ]
    assert list(sample_chunks(_RecordingReplay(events := []), 4, 0, 50)) == [] and events == []
