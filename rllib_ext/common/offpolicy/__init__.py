"""The off-policy family's home: what TD3_EXT, the ERL critic (AESRL_EXT, CEMRL_EXT) and ReF-ER share.

- ``td3.py``: TD3's blocks (Fujimoto et al. 2018, Algorithm 1): the actor and twin critic
  builders, the losses, :class:`~rllib_ext.common.offpolicy.td3.TD3Updater`.
- ``transitions.py``: the uniform transition buffer and its Ray actor.
- ``target_networks.py``: soft (Polyak) target updates.
- ``algorithm.py``: :class:`~rllib_ext.common.offpolicy.algorithm.OffPolicyAlgorithm`, the one
  ``training_step`` of TD3_EXT and ReF-ER (sample, store and update in the Learner, finite
  check, weight sync).
- ``learner.py``: :class:`~rllib_ext.common.offpolicy.learner.ReplayLearner`, the Learner base
  owning a replay (the update template and replay checkpointing), and its
  :class:`~rllib_ext.common.offpolicy.learner.UpdateReport`.

Modules are imported by path, not from here, so that importing the package costs nothing.
"""
