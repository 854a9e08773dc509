"""RUTEd (Lum et al.): gender-occupation neutrality, skew and stereotype in a next-word
test and in long-form text."""
