"""The kit every kind draws its results with, below the kinds: plain-text tables and
blocks (:mod:`.text`), HTML and Markdown documents (:mod:`.document`), figures
(:mod:`.figures`), the compare page's figures of differences (:mod:`.panels`), and
the formats they share (:mod:`.common`). The pages and commands that put a kind's
results together (``reports/``) stand above the kinds."""
