"""IMPACT's circular buffer (paper 004 Algorithm 1): at most K draws per batch, FIFO overflow."""

from __future__ import annotations

import pytest

from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer


@pytest.mark.parametrize("N,K", [(1, 1), (3, 2), (4, 5)])
def test_each_batch_drawn_at_most_k_times_then_evicted(N, K):
    buf = CircularBuffer(N, K, seed=0)
    draws = {}
    first_draws = {}
    for item in range(N):
        buf.put(item)
    while len(buf):
        item, k = buf.draw()
        assert k == draws.get(item, 0)  # k counts earlier draws of this batch
        draws[item] = draws.get(item, 0) + 1
        if k == 0:
            first_draws[item] = first_draws.get(item, 0) + 1
        assert draws[item] <= K
        held = [e.item for e in buf._entries]
        if draws[item] == K:
            assert item not in held  # evicted after its K-th draw
        else:
            assert item in held
    assert draws == {i: K for i in range(N)}
    assert first_draws == {i: 1 for i in range(N)}
    assert buf.num_evicted_used_up == N and buf.num_draws == N * K
    assert sorted(buf.pop_evicted_draw_counts()) == [K] * N
    with pytest.raises(IndexError):
        buf.draw()


def test_overflow_replaces_the_oldest_batch():
    buf = CircularBuffer(2, 3, seed=0)
    assert buf.put("a") is None and buf.put("b") is None
    buf.draw()
    assert buf.put("c") in (0, 1)  # "a" leaves with the draws it had
    assert [e.item for e in buf._entries] == ["b", "c"]
    assert buf.num_evicted_overflow == 1 and buf.fill == 1.0
    assert buf.num_draws_left == sum(3 - e.draws for e in buf._entries)


def test_buffer_rejects_bad_sizes():
    with pytest.raises(ValueError, match="N"):
        CircularBuffer(0, 1)
    with pytest.raises(ValueError, match="K"):
        CircularBuffer(1, 0)
