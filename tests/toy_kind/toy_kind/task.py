"""The toy kind's one task, as ``biasaudit tasks`` lists it."""

from biasaudit.kinds.common import TaskInfo

TASK_INFOS = (
    TaskInfo(
        name="toy-yesno", summary="Toy yes/no questions (a kind written outside biasaudit)",
        groups="none", pools="none", data=(), prompts=(),
        usage="biasaudit run toy-yesno --model MODEL [--questions N]",
    ),
)  # fmt: skip
