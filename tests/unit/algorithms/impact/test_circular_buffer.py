"""IMPACT's circular buffer C(N, K) (paper 004 §3.2, Figure 4a, Algorithm 1 lines 4, 6, 10).

Round-robin traversal of N slots, every batch drawn exactly K times with its draws interleaved
with the other held batches', a bounded wait queue that drops its oldest batch, and a draw that
waits (without spinning) for the next batch.
"""

from __future__ import annotations

import threading

import pytest

from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer


def _drain(buf):
    out = []
    while (drawn := buf.draw()) is not None:
        out.append(drawn)
    return out


@pytest.mark.parametrize("N,K", [(1, 1), (3, 2), (4, 5)])
def test_full_buffer_is_traversed_in_turn_and_each_batch_drawn_exactly_k_times(N, K):
    buf = CircularBuffer(N, K, queue_size=N)
    for item in range(N):
        buf.put(item)
    draws = _drain(buf)
    # Figure 4a: pass j visits batch 0, 1, ..., N-1, each for the j-th time.
    assert draws == [(item, k) for k in range(K) for item in range(N)]
    assert len(buf) == 0 and buf.num_draws_left == 0
    assert buf.num_evicted_used_up == N and buf.num_draws == N * K
    assert sorted(buf.pop_evicted_draw_counts()) == [K] * N


def test_steady_stream_keeps_n_batches_interleaved():
    """One new batch per K draws: after the warm-up every batch is drawn K times, N draws apart."""
    N, K = 3, 2
    buf = CircularBuffer(N, K, queue_size=1)
    buf.record_draws = True
    for item in range(12):
        buf.put(item)
        _drain(buf)
    log = buf.draw_log
    counts = {}
    for number, k in log:
        assert k == counts.get(number, 0)
        counts[number] = k + 1
    assert all(c == K for n, c in counts.items() if n < 12 - N)  # every finished batch got K draws
    assert buf.num_dropped_undrawn == 0
    # A batch's two draws are not back to back once N batches are held: consecutive draws differ.
    tail = [number for number, _ in log[N * K :]]
    assert all(a != b for a, b in zip(tail, tail[1:], strict=False))


def test_full_wait_queue_drops_its_oldest_batch_undrawn():
    buf = CircularBuffer(1, 2, queue_size=2)
    assert buf.put("a") is False and buf.put("b") is False
    assert buf.draw() == ("a", 0)  # "a" takes the slot; "b" waits
    assert buf.put("c") is False and buf.put("d") is True  # "b" is dropped before any draw
    assert buf.num_dropped_undrawn == 1 and buf.num_waiting == 2
    assert [item for item, _ in _drain(buf)] == ["a", "c", "c", "d", "d"]
    assert buf.num_added == 4 and buf.num_draws == 6


def test_nonblocking_draw_returns_none_when_the_cursor_slot_is_empty_and_nothing_waits():
    buf = CircularBuffer(2, 2, queue_size=2)
    assert buf.draw() is None
    buf.put("a")
    assert buf.draw() == ("a", 0)
    # The cursor moved to the empty slot 1; nothing waits, so the learner would wait here
    # although "a" has a draw left (MinibatchBuffer's traversal).
    assert buf.draw() is None and buf.num_draws_left == 1
    buf.put("b")
    assert buf.draw() == ("b", 0) and buf.draw() == ("a", 1)


def test_blocking_draw_waits_for_a_put_and_close_releases_it():
    buf = CircularBuffer(1, 1, queue_size=1)
    got = []
    started = threading.Event()

    def learner():
        started.set()
        got.append(buf.draw(block=True))
        got.append(buf.draw(block=True))

    thread = threading.Thread(target=learner)
    thread.start()
    started.wait()
    buf.put("x")
    thread.join(timeout=0.01)
    buf.close()  # wakes the second, waiting draw
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert got == [("x", 0), None]


def test_pause_waits_for_the_drawn_batch_and_holds_new_draws_until_resume():
    buf = CircularBuffer(1, 3, queue_size=1)
    buf.put("a")
    assert buf.draw() == ("a", 0)  # drawn, its update not finished
    paused = threading.Event()
    thread = threading.Thread(target=lambda: (buf.pause(), paused.set()))
    thread.start()
    assert not paused.wait(0.05)  # pause() waits for the release
    buf.release()
    assert paused.wait(10)
    thread.join(timeout=10)
    assert buf.draw() is None and buf.draw(block=True, timeout=0.01) is None  # held
    buf.resume()
    assert buf.draw() == ("a", 1)


def test_buffer_rejects_bad_sizes():
    with pytest.raises(ValueError, match="N"):
        CircularBuffer(0, 1)
    with pytest.raises(ValueError, match="K"):
        CircularBuffer(1, 0)
    with pytest.raises(ValueError, match="circular_buffer_queue_size"):
        CircularBuffer(1, 1, queue_size=0)
