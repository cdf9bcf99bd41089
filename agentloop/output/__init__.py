"""Structured output: an agent's answer as a validated, typed value (see docs/output.md).

``AgentBuilder.output(T, mode=OutputMode.AUTO)`` asks for it; :class:`OutputMode` and
:class:`OutputValidationError` are exported by :mod:`agentloop` as well.
"""

from ._errors import OutputValidationError
from ._spec import OutputMode, OutputProblems, OutputSpec, output_spec

__all__ = [
    "OutputMode",
    "OutputProblems",
    "OutputSpec",
    "OutputValidationError",
    "output_spec",
]
