"""Decisions: yes/no decisions about persons across age, gender and race (Tamkin et al.
2023, the discrim-eval design)."""
