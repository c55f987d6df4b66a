"""The replay-learner template: store -> updates due -> update -> metrics -> report; checkpoint state."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray.rllib.core.learner.learner import Learner

from rllib_ext.common.offpolicy.learner import ReplayLearner, UpdateReport


class _Replay:
    def __init__(self):
        self.items: list = []

    def __len__(self):
        return len(self.items)

    def get_state(self):
        return {"items": list(self.items)}

    def set_state(self, state):
        self.items = list(state["items"])


class _Metrics:
    def __init__(self):
        self.logged: dict = {}

    def reduce(self):
        out, self.logged = self.logged, {}
        return out


class _Toy(ReplayLearner):
    """One update per two stored steps; a change of module state on the first store."""

    STATE_KEY = "toy"
    REPLAY_STATE_KEY = "replay"

    def __init__(self, checkpoint_replay=False):  # no RLlib build: the template only
        self.config = SimpleNamespace(checkpoint_replay=checkpoint_replay)
        self.metrics = _Metrics()
        self.replay = _Replay()
        self.steps = self.updates = 0
        self.first = True

    def _store(self, episodes):
        self.replay.items.extend(episodes)
        self.steps += len(episodes)
        if self.first:
            self.first, self._weights_changed = False, True
        return self.steps // 2 - self.updates

    def _take_updates(self, num_updates):
        assert num_updates > 0
        self.updates += num_updates

    def _log_replay_metrics(self):
        self.metrics.logged["updates"] = self.updates

    def _counter_state(self):
        return {"steps": self.steps, "updates": self.updates}

    def _set_counter_state(self, state):
        self.steps, self.updates = state["steps"], state["updates"]


_Toy.__abstractmethods__ = frozenset()  # RLlib's abstract Learner methods: not used by the template


def test_train_on_episodes_reports_updates_metrics_and_weight_changes():
    learner = _Toy()
    assert learner.train_on_episodes([1]) == UpdateReport(results={"updates": 0}, num_updates=0, weights_changed=True)
    assert learner.train_on_episodes([2]) == UpdateReport(results={"updates": 1}, num_updates=1, weights_changed=True)
    assert learner.train_on_episodes([]) == UpdateReport(results={"updates": 1}, num_updates=0, weights_changed=False)


@pytest.mark.parametrize("checkpoint_replay", [False, True])
def test_state_round_trip_with_and_without_the_replay(monkeypatch, checkpoint_replay):
    monkeypatch.setattr(Learner, "get_state", lambda self, *a, **k: {})
    monkeypatch.setattr(Learner, "set_state", lambda self, state: None)
    learner = _Toy(checkpoint_replay)
    learner.train_on_episodes([1, 2, 3])
    state = learner.get_state()
    assert ("replay" in state["toy"]) == checkpoint_replay
    restored = _Toy()
    restored.set_state(state)
    assert (restored.steps, restored.updates) == (3, 1)
    assert len(restored.replay) == (3 if checkpoint_replay else 0)
    assert "toy" not in learner.get_state(components=["rl_module"])  # weight syncs do not carry it
