"""Text results skip the save-and-load check: they must survive one unchanged anyway."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agentloop import _serde
from agentloop.core._items import ToolResultPart
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
    saved = json.dumps(_serde.unstructure(result), allow_nan=False, ensure_ascii=False)
    assert _serde.structure(json.loads(saved), ToolResultPart) == result
