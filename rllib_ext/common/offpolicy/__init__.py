"""The off-policy family's home: what TD3_EXT, the ERL critic (AESRL_EXT, CEMRL_EXT) and ReF-ER share.

- ``td3.py``: TD3's blocks (Fujimoto et al. 2018, Algorithm 1): the actor and twin critic
  builders, the losses, :class:`~rllib_ext.common.offpolicy.td3.TD3Updater`.
- ``transitions.py``: the uniform transition buffer and its Ray actor.
- ``target_networks.py``: soft (Polyak) target updates.

Modules are imported by path, not from here, so that importing the package costs nothing.
"""
