"""TD3_EXT: TD3 (Fujimoto et al. 2018) as the RL part of AES-RL (paper 001)."""
