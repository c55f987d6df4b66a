"""The transition buffer: FIFO wrap-around, state round trip, errors."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_ext.common.transitions import TransitionBuffer
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
    with pytest.raises(ValueError, match="obs_dim"):
        TransitionBuffer(5, 3, 1).set_state(buf.get_state())
