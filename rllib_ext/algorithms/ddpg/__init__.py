"""DDPG_EXT: DDPG with ReF-ER (paper 003 §2, Algorithm 4, App. A)."""
