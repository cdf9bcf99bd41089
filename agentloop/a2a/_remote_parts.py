"""A2A values to ours and back: a task as it streams in, its result as a tool output.

:class:`TaskView` folds the events of ``SendMessage`` / ``SendStreamingMessage``
/ ``GetTask`` into one view of the remote task (its ids, state, status
message and artifacts; a direct ``Message`` reply counts as a completed task).
:func:`to_output` turns the finished view into a :class:`ToolOutput`.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import Artifact, Message, Part, Role, StreamResponse, Task, TaskState

from ..core._items import FilePart, MediaPart, TextPart
from ..core._items import Part as OurPart
from ..tools._tool import ToolOutput
from ._remote_questions import bounded

__all__ = [
    "AGENT_KEY",
    "DATA_KEY",
    "TASK_KEY",
    "TaskView",
    "build_message",
    "state_name",
    "to_output",
    "data_values",
]

TASK_KEY = "a2a.task"
"""Result metadata: the remote task (``{"id", "contextId", "state"}``)."""
AGENT_KEY = "a2a.agent"
"""Result metadata: the remote agent's URL."""
DATA_KEY = "a2a.data"
"""Part metadata: the part was an A2A data part (its text is the data as JSON)."""

_MEDIA = ("image/", "audio/", "video/")


def state_name(state: int) -> str:
    """``TASK_STATE_COMPLETED`` and so on (the number for an unknown state)."""
    try:
        return str(TaskState.Name(state))
    except ValueError:
        return f"unknown state {state}"


class TaskView:
    """What is known of one remote task, event by event."""

    def __init__(self) -> None:
        self.task_id = ""
        self.context_id = ""
        self.state: int = TaskState.TASK_STATE_UNSPECIFIED
        self.status: Message | None = None
        self.artifacts: dict[str, Artifact] = {}
        self.reply: Message | None = None  # a direct Message answer, no task

    @property
    def done(self) -> bool:
        """Whether the task rests: ended, or waiting for input or authentication."""
        return self.reply is not None or self.state not in (
            TaskState.TASK_STATE_UNSPECIFIED,
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )

    def add(self, event: StreamResponse) -> None:
        """Fold one event in."""
        if event.HasField("task"):
            self.take_task(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            self._ids(update.task_id, update.context_id)
            self._status(update.status.state, update.status)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            self._ids(update.task_id, update.context_id)
            self._artifact(update.artifact, append=update.append)
        elif event.HasField("message"):
            self.reply = event.message
            self._ids(event.message.task_id, event.message.context_id)

    def take_task(self, task: Task) -> None:
        """A whole task snapshot (``SendMessage``'s answer, ``GetTask``)."""
        self._ids(task.id, task.context_id)
        self._status(task.status.state, task.status)
        for artifact in task.artifacts:
            self.artifacts[artifact.artifact_id] = artifact

    def _ids(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id

    def _status(self, state: int, status: Any) -> None:
        self.state = state
        self.status = status.message if status.HasField("message") else None

    def _artifact(self, artifact: Artifact, *, append: bool) -> None:
        known = self.artifacts.get(artifact.artifact_id)
        if append and known is not None:
            known.parts.extend(artifact.parts)  # as the server's own task record keeps it
        else:
            self.artifacts[artifact.artifact_id] = artifact

    def status_text(self) -> str:
        """The status message's text."""
        return "\n".join(get_text_parts(self.status.parts)) if self.status is not None else ""

    def status_data(self) -> list[Any]:
        """The status message's data parts."""
        return data_values(self.status.parts) if self.status is not None else []

    def ids(self) -> dict[str, Any]:
        """``{"id", "contextId", "state"}`` of the task."""
        return {"id": self.task_id, "contextId": self.context_id, "state": state_name(self.state)}


def build_message(
    parts: list[dict[str, Any]], *, task_id: str | None, context_id: str, metadata: Any = None
) -> Message:
    """A user message of ``parts`` (``{"text"}`` / ``{"data"}``) on the task and context."""
    built: list[Part] = [
        new_text_part(part["text"]) if "text" in part else new_data_part(part["data"])
        for part in parts
    ]
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=built,
        context_id=context_id,
        task_id=task_id or "",
    )
    if metadata:
        message.metadata.update(metadata)
    return message


def data_values(parts: Iterable[Part]) -> list[Any]:
    """The values of ``parts``' data parts; ``ValueError`` naming it when one holds a
    number JSON cannot carry (``Infinity``, ``NaN``: protobuf's ``Value`` holds them)."""
    try:
        return get_data_parts(list(parts))
    except ValueError as error:
        raise ValueError(f"a data part is not JSON ({error})") from None


def to_output(view: TaskView, agent: str, *, is_error: bool = False) -> ToolOutput:
    """The result of a finished view: its artifacts' parts (else the reply's or the
    status message's parts). All text: one string, the parts joined by newlines (as
    a2a-sdk's ``get_artifact_text``); one data part: its value; else the parts."""
    parts: list[Part] = []
    for artifact in view.artifacts.values():
        parts.extend(artifact.parts)
    if not parts:
        source = view.reply if view.reply is not None else view.status
        parts = list(source.parts) if source is not None else []
    converted = [to_part(part) for part in parts]
    value: Any
    if all(isinstance(p, TextPart) and DATA_KEY not in p.metadata for p in converted):
        value = "\n".join(p.text for p in converted if isinstance(p, TextPart))
    elif len(parts) == 1 and parts[0].HasField("data"):
        value = data_values(parts)[0]
    else:
        value = converted
    metadata = {AGENT_KEY: agent} if view.reply is not None else {
        AGENT_KEY: agent, TASK_KEY: view.ids()
    }  # fmt: skip
    return ToolOutput(value, is_error=is_error, metadata=metadata)


def to_part(part: Part) -> OurPart:
    """One A2A part as ours: text as text, data as its JSON text, bytes and URLs as
    media (images, audio, video) or files."""
    mime = part.media_type or None
    name = part.filename or None
    if part.HasField("text"):
        return TextPart(part.text)
    if part.HasField("data"):
        [data] = data_values([part])
        return TextPart(json.dumps(data, ensure_ascii=False), metadata={DATA_KEY: True})
    if part.HasField("raw"):
        data = base64.b64encode(part.raw).decode("ascii")
        if mime is not None and mime.startswith(_MEDIA):
            return MediaPart(mime, data=data)
        return FilePart(name, mime_type=mime, data=data)
    if part.HasField("url"):
        if mime is not None and mime.startswith(_MEDIA):
            return MediaPart(mime, uri=part.url)
        return FilePart(name, mime_type=mime, uri=part.url)
    return TextPart(f"[an empty A2A part{f' of type {bounded(mime, 100)}' if mime else ''}]")
