"""NAF_EXT: Normalized Advantage Functions with ReF-ER (paper 003 §2, Eq. 4, App. A)."""
