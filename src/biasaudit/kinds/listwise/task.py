"""The listwise kind's own tasks: none. Its audits are the allocation kind's tasks run
with ``--method listwise``, which ``biasaudit tasks`` lists there."""

from __future__ import annotations

from biasaudit.kinds.common import TaskInfo

__all__ = ["TASK_INFOS"]

TASK_INFOS: tuple[TaskInfo, ...] = ()
