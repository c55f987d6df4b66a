"""IMPACT_EXT at APPO's scale (issue 21): two learners (torch DDP), two policies, a GPU per learner.

With several learners every update is an all-reduce of the gradients (RLlib's DDP), so the
learners must run the same updates in the same order: the driver hands each the same number of
train batches, the learner threads pause at an agreed draw at the end of each ``train()``, and
the modules train in the same order. These tests train several iterations under a liveness
bound (``pytest-timeout`` with its thread method, which also ends a driver blocked in
``ray.get``: a learner waiting forever in an all-reduce fails the run instead of hanging it;
with the threads held at once instead of at an agreed draw, the first test hangs) and check
that the learners' weights stay identical after their updates.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole

from rllib_ext.algorithms.impact.impact import IMPACT, IMPACTConfig
from rllib_ext.algorithms.impact.torch.impact_torch_learner import IMPACTTorchLearner

#: Seconds the first learner lingers after each of its updates (see LingeringLearner).
LINGER_S = 0.2


class LingeringLearner(IMPACTTorchLearner):
    """The first learner lingers after each update, while the second one is already inside its
    next update waiting in the all-reduce: the moment where holding the threads at once (instead
    of at an agreed draw) deadlocks them (see ``test_circular_buffer.py`` for the same race
    without Ray)."""

    def after_gradient_based_update(self, *, timesteps):
        super().after_gradient_based_update(timesteps=timesteps)
        if self._learner_index == 0:
            time.sleep(LINGER_S)


def _config(env="CartPole-v1", runners=1, **training):
    training = {
        "train_batch_size_per_learner": 50,
        "circular_buffer_num_batches": 2,
        "circular_buffer_iterations_per_batch": 2,
        "circular_buffer_queue_size": 2,
        "lr": 1e-3,
        # η adapts at every target sync (KL above twice a tiny target): the learners must agree.
        "kl_coeff": 1.0,
        "kl_target": 1e-8,
        **training,
    }
    return (
        IMPACTConfig()
        .environment(env)
        .env_runners(num_env_runners=runners, rollout_fragment_length=25)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .training(**training)
        .reporting(min_time_s_per_iteration=1)
        .debugging(seed=0)
    )


def _two_policies(config):
    return config.environment(MultiAgentCartPole, env_config={"num_agents": 2}).multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}"
    )


def _learner_view(learner):
    """What must be equal on every learner: counts, η and the weights (target networks included)."""
    return {
        "updates": learner.num_updates,
        "draws": learner.buffer.num_draws,
        "in_use": learner.buffer._in_use,
        "target_syncs": learner.num_target_syncs,
        "kl_coeffs": {mid: float(v.item()) for mid, v in learner.curr_kl_coeffs_per_module.items()},
        "weights": {
            mid: {k: v.detach().cpu().numpy().copy() for k, v in learner.module[mid].unwrapped().state_dict().items()}
            for mid in learner.module.keys()
        },
    }


def _on_learners(algo, func):
    return [r.get() for r in algo.learner_group.foreach_learner(func)]


def _views(algo):
    return _on_learners(algo, _learner_view)


def _assert_identical(views):
    first = views[0]
    for other in views[1:]:
        for key in ("updates", "draws", "in_use", "target_syncs", "kl_coeffs"):
            assert other[key] == first[key], (key, [v[key] for v in views])
        assert other["weights"].keys() == first["weights"].keys()
        for mid, weights in first["weights"].items():
            for name, value in weights.items():
                np.testing.assert_array_equal(other["weights"][mid][name], value, err_msg=f"{mid}/{name}")


def _changed(before, after, mid):
    return any(not np.array_equal(before["weights"][mid][k], after["weights"][mid][k]) for k in before["weights"][mid])


@pytest.mark.timeout(900, method="thread")
def test_two_learners_with_the_learner_thread_pause_together_and_stay_identical(ray_four_cpus):
    """Issue 21 item 3, (a) and (b): each train() ends with both learner threads held after the
    same draw, with nothing in use, although the first one lingers after every update; their
    counts, η and weights are identical after every iteration, and they learn."""
    algo = _config().learners(num_learners=2, learner_class=LingeringLearner).build_algo()
    try:
        initial = _views(algo)
        _assert_identical(initial)  # DDP broadcasts the first learner's weights at build
        iterations = 0
        for _ in range(60):  # a liveness bound: the runner's start can take many seconds
            result = algo.train()
            iterations += 1
            views = _views(algo)
            _assert_identical(views)
            assert views[0]["in_use"] == 0  # held between updates
            if iterations >= 3 and views[0]["updates"] >= 8:
                break
        assert views[0]["updates"] >= 8 and views[0]["target_syncs"] >= 1
        assert views[0]["kl_coeffs"]["default_policy"] > 1.0  # adapted, equally on both
        assert _changed(initial[0], views[0], "default_policy")
        shared = result["learners"]["__all_modules__"]
        assert shared["circular_buffer_num_dropped_lifetime"] == 0  # the learners never drop
        assert "circular_buffer_num_held_back" in shared
        assert all(_on_learners(algo, lambda learner: learner.learner_thread_alive))
    finally:
        algo.stop()


@pytest.mark.timeout(900, method="thread")
def test_two_learners_train_two_policies_in_training_step(ray_four_cpus):
    """Two learners, two policies of RLlib's MultiAgentCartPole, the learner in training_step:
    both modules train, identically on both learners (the modules train in the same order on
    every learner, whatever order the agents appear in the drawn episodes)."""
    config = _two_policies(_config(runners=1, learner_thread=False)).learners(num_learners=2)
    algo = config.build_algo()
    try:
        initial = _views(algo)
        _assert_identical(initial)
        for _ in range(60):  # a liveness bound
            result = algo.train()
            views = _views(algo)
            _assert_identical(views)
            if views[0]["updates"] >= 4 and all(_changed(initial[0], views[0], mid) for mid in ("p0", "p1")):
                break
        assert views[0]["updates"] >= 4
        for mid in ("p0", "p1"):
            assert _changed(initial[0], views[0], mid), mid
            assert result["learners"][mid]["num_module_steps_trained_lifetime"] > 0
            assert np.isfinite(result["learners"][mid]["policy_loss"])
    finally:
        algo.stop()


def _module_states(algo):
    state = algo.learner_group.get_state()["learner"]
    return state["rl_module"], state["impact"]


@pytest.mark.timeout(900, method="thread")
def test_two_policies_train_two_iterations_and_round_trip_a_checkpoint(ray_four_cpus, tmp_path):
    """RLlib's MultiAgentCartPole with two policies (one learner, its thread): two iterations,
    both modules update (their own target networks and η), a checkpoint restores both."""
    config = _two_policies(_config(runners=1, target_network_update_freq=5))
    config.training(train_batch_size_per_learner=100)
    config.reporting(min_train_timesteps_per_iteration=400)  # each iteration trains (K draws count)
    algo = config.build_algo()
    try:
        initial = _views(algo)[0]
        for _ in range(2):
            result = algo.train()
        view = _views(algo)[0]
        assert view["updates"] > 0 and view["target_syncs"] >= 1
        for mid in ("p0", "p1"):
            assert _changed(initial, view, mid), mid
            learner = result["learners"][mid]
            assert learner["num_module_steps_trained_lifetime"] > 0
            for key in ("policy_loss", "vf_loss", "mean_kl_loss", "ratio_r3_mean"):
                assert np.isfinite(learner[key]), (mid, key)
            assert view["kl_coeffs"][mid] > 1.0  # each module's η adapted at the syncs
            # Each module's target network is its own: synced from that module's weights.
            target = {k[len("_old_pi.") :]: v for k, v in view["weights"][mid].items() if k.startswith("_old_pi.")}
            assert target and all(np.all(np.isfinite(v)) for v in target.values())
        assert not all(
            np.array_equal(view["weights"]["p0"][k], view["weights"]["p1"][k]) for k in view["weights"]["p0"]
        )
        modules, impact = _module_states(algo)
        path = algo.save_to_path(str(tmp_path / "ckpt"))
    finally:
        algo.stop()

    restored = IMPACT.from_checkpoint(path)
    try:
        modules2, impact2 = _module_states(restored)
        assert impact2 == impact and modules2.keys() == modules.keys() == {"p0", "p1"}
        for mid in modules:
            for key in modules[mid]:
                np.testing.assert_array_equal(
                    np.asarray(modules2[mid][key]), np.asarray(modules[mid][key]), err_msg=f"{mid}/{key}"
                )
        restored.train()  # keeps training after the restore
    finally:
        restored.stop()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.timeout(900, method="thread")
def test_one_learner_on_one_gpu_trains(ray_four_cpus):
    """The paper's learner on one GPU (§4.3): ``num_gpus_per_learner: 1``; the batches, the
    target outputs and the trace operator live on the GPU."""
    algo = _config(runners=1).learners(num_learners=1, num_gpus_per_learner=1).build_algo()
    try:
        assert _on_learners(algo, lambda learner: learner._device.type) == ["cuda"]
        for _ in range(30):  # a liveness bound
            algo.train()
            view = _views(algo)[0]
            if view["updates"] >= 4:
                break
        assert view["updates"] >= 4
        assert all(np.all(np.isfinite(v)) for v in view["weights"]["default_policy"].values())
    finally:
        algo.stop()
