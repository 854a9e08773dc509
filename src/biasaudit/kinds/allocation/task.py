"""The allocation kind's built-in tasks (resume screening, essay grading, a task of
your own), which live with the candidates they draw (:mod:`biasaudit.kinds.candidates`)."""

from __future__ import annotations

from biasaudit.kinds.candidates.tasks import TASK_INFOS

__all__ = ["TASK_INFOS"]
