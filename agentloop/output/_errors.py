"""The error a turn ends with when the model's answer never matched the output schema."""

from __future__ import annotations

from collections.abc import Sequence

from ..core._errors import ProviderError, ProviderErrorKind

__all__ = ["OutputValidationError"]


class OutputValidationError(ProviderError):
    """Raised (as a turn's ``TurnResult.error``) when the model's answer did not match the
    agent's output schema, after every retry the agent allowed.

    ``problems`` lists what was wrong with the last answer (each names its JSON path),
    ``answer`` is the last answer as the model gave it (text, or the final-answer
    tool's input), ``attempts`` how many answers were judged. Its ``kind`` is
    ``ProviderErrorKind.INVALID_RESPONSE`` and its ``error_type`` ``"invalid_output"``.
    """

    def __init__(
        self, output_name: str, problems: Sequence[str], answer: object, attempts: int
    ) -> None:
        listed = "; ".join(problems)
        tries = "answer" if attempts == 1 else f"{attempts} answers"
        super().__init__(
            f"the model's output did not match the schema {output_name!r} after {tries}: {listed}",
            error_type="invalid_output",
            kind=ProviderErrorKind.INVALID_RESPONSE,
        )
        self.output_name = output_name
        self.problems = tuple(problems)
        self.answer = answer
        self.attempts = attempts
