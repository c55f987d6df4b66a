"""IMPACT's learner thread (paper 004 Figure 1c) on its own, without Ray or RLlib.

Start and stop, pause at an agreed draw and resume, an exception in the step reaching the caller
with its traceback, and every wait bounded (the idle draw on an empty buffer included).
"""

from __future__ import annotations

import ast
import threading
import time
import traceback

import pytest

from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer
from rllib_ext.algorithms.impact.learner_thread import LearnerThread

#: A liveness bound for the polls below (not a timing assertion).
LIMIT_S = 10.0


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"not reached within {LIMIT_S} s: {what}"
        time.sleep(0.005)


class Recorder:
    """A step function that records its draws; ``gate`` (when cleared) holds every step."""

    def __init__(self):
        self.steps: list[tuple[object, int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, item, k):
        self.entered.set()
        assert self.gate.wait(LIMIT_S), "the test never opened the gate"
        self.steps.append((item, k))


def _buffer(items, n=2, k=2):
    buf = CircularBuffer(n, k, queue_size=max(1, len(items)))
    for item in items:
        buf.put(item)
    return buf


def test_thread_steps_on_every_draw_and_stops():
    buf, step = _buffer(["a", "b"]), Recorder()
    thread = LearnerThread(buf, step, name="test thread")
    assert not thread.alive
    thread.resume()
    _wait_for(lambda: len(step.steps) == 4, "four steps")
    assert step.steps == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]  # C(N, K)'s round robin
    assert thread.alive  # waiting on the empty buffer
    buf.put("c")
    _wait_for(lambda: len(step.steps) == 5, "the step on a later put")
    assert thread.stop(timeout_s=LIMIT_S)
    assert not thread.alive
    thread.resume()  # a stopped thread does not start again
    assert not thread.alive


def test_the_idle_draw_on_an_empty_buffer_is_bounded():
    """The thread never waits without a bound: every draw has a finite timeout, so it sees its
    stop flag even when nothing wakes the buffer."""
    timeouts = []

    class RecordingBuffer(CircularBuffer):
        def draw(self, block=False, timeout=None):
            timeouts.append((block, timeout))
            return super().draw(block=block, timeout=timeout)

        def close(self):  # a buffer that never wakes its waiters
            pass

    thread = LearnerThread(RecordingBuffer(1, 1), Recorder(), idle_wait_s=0.05)
    thread.resume()
    _wait_for(lambda: len(timeouts) >= 2, "two idle draws")
    assert all(block and timeout is not None and timeout <= 0.05 for block, timeout in timeouts)
    assert thread.stop(timeout_s=LIMIT_S)  # ended by its flag alone


def test_stop_is_bounded_when_an_update_never_ends():
    step = Recorder()
    step.gate.clear()
    thread = LearnerThread(_buffer(["a"]), step)
    thread.resume()
    assert step.entered.wait(LIMIT_S)
    assert not thread.stop(timeout_s=0.05)  # still inside its update: reported, not waited for
    step.gate.set()
    _wait_for(lambda: not thread.alive, "the thread to end after its update")


def test_pause_at_an_agreed_draw_then_resume():
    """stop_draws stops new draws; pause lets the thread draw on to the agreed count (another
    learner's), waits for the update, and holds it; resume lets it go on."""
    buf, step = _buffer(["a", "b", "c"], n=3, k=2), Recorder()
    step.gate.clear()
    thread = LearnerThread(buf, step)
    thread.resume()
    assert step.entered.wait(LIMIT_S)
    started = thread.stop_draws()
    assert started == 1  # the running draw
    step.gate.set()
    thread.pause(started + 2, timeout_s=LIMIT_S)  # the largest count of all learners
    assert len(step.steps) == 3 and buf.num_draws == 3
    time.sleep(0.05)
    assert len(step.steps) == 3  # held: no update between iterations
    thread.resume()
    _wait_for(lambda: len(step.steps) == 6, "the remaining draws after resume")
    thread.stop(timeout_s=LIMIT_S)


def test_pause_is_bounded_and_names_what_it_waited_for():
    step = Recorder()
    step.gate.clear()
    thread = LearnerThread(_buffer(["a"]), step, name="learner 3's thread")
    thread.resume()
    assert step.entered.wait(LIMIT_S)
    started = thread.stop_draws()
    with pytest.raises(TimeoutError, match=r"learner 3's thread did not pause after draw 1 within .*: a hint\)"):
        thread.pause(started, timeout_s=0.1, hint=": a hint")
    step.gate.set()
    thread.stop(timeout_s=LIMIT_S)


def _failing_step(item, k):
    if item == "bad":
        raise RuntimeError("step failed on purpose")


def test_an_error_in_the_step_reaches_the_caller_with_its_traceback():
    buf = _buffer(["ok", "bad"], n=2, k=1)
    thread = LearnerThread(buf, _failing_step, name="failing thread")
    thread.resume()
    _wait_for(lambda: not thread.alive, "the thread to end on the error")
    assert isinstance(thread.error, RuntimeError)
    with pytest.raises(RuntimeError, match="step failed on purpose") as info:
        thread.raise_error()
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert "_failing_step" in frames  # raised where the step failed, in the thread
    thread.raise_error()  # handed over once
    assert thread.error is None
    # The draw was released: a pause after it does not wait for it.
    thread.pause(None, timeout_s=LIMIT_S)
    buf.put("ok")
    thread.resume()  # a new thread after the hand-off (e.g. after a restore)
    _wait_for(lambda: buf.num_draws == 3, "the new thread's draw")
    assert thread.alive
    thread.stop(timeout_s=LIMIT_S)


def test_an_error_while_pausing_reaches_the_caller():
    """A thread that fails before the agreed draw ends the pause with its error, not a timeout."""
    thread = LearnerThread(_buffer(["ok", "bad", "ok"], n=3, k=1), _failing_step)
    thread.resume()
    _wait_for(lambda: not thread.alive, "the thread to end on the error")
    with pytest.raises(RuntimeError, match="step failed on purpose"):
        thread.pause(3, timeout_s=LIMIT_S)


def test_run_in_caller_steps_without_waiting():
    """Without the thread (the ablation), the caller draws until nothing can be drawn, or a cap."""
    buf, step = _buffer(["a", "b"]), Recorder()
    thread = LearnerThread(buf, step)
    assert thread.run_in_caller(max_steps=1) == 1
    assert thread.run_in_caller() == 3
    assert thread.run_in_caller() == 0  # empty: returns at once
    assert step.steps == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert not thread.alive


def test_the_module_imports_nothing_of_ray_or_rllib():
    import rllib_ext.algorithms.impact.learner_thread as module

    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] in ("ray", "rllib_ext", "torch")}, imported
