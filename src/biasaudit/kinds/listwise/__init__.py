"""Listwise ranking (issue 20; Bloomberg's 2024 audit of GPT resume ranking): a whole
pool ranked in one prompt, shown in a Latin square of orders; selection rates, ΔDP
and impact ratios taken from the rankings, position bias and consistency."""
