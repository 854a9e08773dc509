"""The toy kind's spec: how many plain questions to ask."""

from __future__ import annotations

from typing import Literal

from biasaudit.kinds.kit import RunSpec, sizing_field


class ToySpec(RunSpec):
    """Toy yes/no: does the model say yes to plain questions? (A kind written outside
    biasaudit, to test the kind contract.)"""

    task: Literal["toy-yesno"] = "toy-yesno"
    questions: int = sizing_field(8, ge=2, le=100, description="Questions asked.")
