"""Text results skip the save-and-load check: they must survive one unchanged anyway."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from agentloop.core._items import ToolResultPart
from agentloop.loop import _converter as loop_converter
from agentloop.tools._outputs import stored_result


@given(st.text(), st.text(), st.one_of(st.none(), st.integers(2, 50)))
def test_a_text_result_reads_back_as_it_was_written(  # limit >= 2: "{}" fits
    call_id: str, text: str, limit: int | None
) -> None:
    result = stored_result(call_id, text, limit)
    assert result.call_id == call_id
    assert result.is_error is False
    assert result.metadata == {}
    if limit is None or len(text) <= limit:
        assert result.output == text
    saved = json.dumps(loop_converter.unstructure(result), allow_nan=False, ensure_ascii=False)
    assert loop_converter.structure(json.loads(saved), ToolResultPart) == result


class _Text(str):
    """A ``str`` subclass: never the direct path, always the full conversion."""


@given(
    st.text(max_size=8),
    st.text(max_size=60),
    st.one_of(st.none(), st.integers(0, 70)),
)
@example("c", "", 0)  # limits below 2: even "{}" does not fit (metadata dropped)
@example("c", "a", 1)
@example("c", "ab", 2)
@example("c", "abc", 2)  # cut
def test_plain_text_gives_what_the_full_conversion_gives(
    call_id: str, text: str, limit: int | None
) -> None:
    # The direct path for a plain str within the limit against the full path (a str
    # subclass converts to the same plain text): the same result, for every limit.
    direct = stored_result(call_id, text, limit)
    converted = stored_result(call_id, _Text(text), limit)
    assert direct == converted
    assert type(direct.output) is type(converted.output)
    assert direct.metadata == converted.metadata
