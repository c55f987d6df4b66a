"""VRACER_EXT: V-RACER with ReF-ER (paper 003 §2, App. A, Algorithm 3)."""
