"""What VRACER_EXT, DDPG_EXT and NAF_EXT share (paper 003): the Config/Algorithm base with the
sampling/update loop, the Learner base that owns the replay memory and the ReF-ER state, the
truncated-normal action distribution and the paper's MLP. The memory and the rules themselves
are in :mod:`rllib_ext.common.replay`.
"""
