"""Tools: the protocol, ``@tool``, schemas from type hints, registries and the executor."""

from ..core._items import OUTCOME_KEY, ResultOutcome, result_outcome
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ._decorator import FunctionTool, PermissionsFunction, tool
from ._errors import ToolInDoubtError
from ._executor import (
    RAW_ARGUMENTS_KEY,
    BasicToolExecutor,
    PendingApproval,
    PreparedCall,
    PrepareOutcome,
    ToolExecutor,
    synthesized_result,
)
from ._questions import Question, QuestionAction, QuestionAnswer
from ._registry import ToolCatalogEvent, ToolRegistry, ToolSource, compare_catalogs
from ._schema import argument_converter, json_schema_for, structure_value
from ._tool import Tool, ToolContext, ToolOutput, ToolRequest

__all__ = [
    "OUTCOME_KEY",
    "RAW_ARGUMENTS_KEY",
    "BasicToolExecutor",
    "FunctionTool",
    "PendingApproval",
    "PermissionsFunction",
    "PrepareOutcome",
    "PreparedCall",
    "Question",
    "QuestionAction",
    "QuestionAnswer",
    "ResultOutcome",
    "Tool",
    "ToolAnnotations",
    "ToolCatalogEvent",
    "ToolContext",
    "ToolExecutor",
    "ToolInDoubtError",
    "ToolOutput",
    "ToolRegistry",
    "ToolRequest",
    "ToolSource",
    "ToolSpec",
    "argument_converter",
    "compare_catalogs",
    "json_schema_for",
    "result_outcome",
    "structure_value",
    "synthesized_result",
    "tool",
]
