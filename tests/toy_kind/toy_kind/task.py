from biasaudit.kinds.kit import TaskInfo

"""The toy kind's one task, as ``biasaudit tasks`` lists it."""


TASK_INFOS = (
    TaskInfo(
        name="toy-yesno", summary="Toy yes/no questions (a kind written outside biasaudit)",
        groups="none", pools="none", data=(), prompts=(),
        usage="biasaudit run toy-yesno --model MODEL [--questions N]",
    ),
)  # fmt: skip
