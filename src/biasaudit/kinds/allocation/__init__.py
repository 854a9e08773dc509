"""Allocational bias (Chen, Ji & Evans): pointwise or pairwise scores, top-k selection,
ΔDP / ΔEO, and RABBI, δ, JSD and EMD measured against them."""
