"""Roots: the source advertises the directories of a PathPolicy and answers roots/list."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_support import http_server

import agentloop as al
import agentloop.permissions
from agentloop.mcp import McpToolSource

pytestmark = pytest.mark.anyio

LOADED = 60.0


async def test_roots_come_from_the_path_policy_in_both_protocol_eras(tmp_path: Path) -> None:
    work, docs = tmp_path / "work", tmp_path / "docs"
    work.mkdir()
    docs.mkdir()
    (tmp_path / "link").symlink_to(work)  # the same directory by another name
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # cannot be resolved: left out
    paths = al.permissions.PathPolicy(
        allowed_roots=[work, tmp_path / "link", tmp_path / "loop", "docs"],
        read_only_roots=["docs"],  # also allowed, but PathPolicy denies writes there: read-only
        base=str(tmp_path),
    )  # fmt: skip
    checker = al.permissions.PolicyChain(
        al.permissions.RequestKindPolicy(deny={"shell.command"}), paths
    )
    expected = {
        "advertised": True,
        "roots": [
            {"uri": work.resolve().as_uri(), "name": str(work)},
            {"uri": docs.resolve().as_uri(), "name": "docs", "_meta": {"agentloop/readOnly": True}},
        ],
    }
    with http_server(tmp_path) as server:
        for protocol in ("legacy", "auto"):  # a server request mid-call; an input-required retry
            async with McpToolSource(
                server, protocol=protocol, roots=checker, connect_timeout=LOADED
            ) as source:
                listed = await source.call_tool("roots", {})
                assert listed.metadata == {"mcp.structured_content": expected}, protocol
        async with McpToolSource(server, protocol="legacy", connect_timeout=LOADED) as source:
            unlisted = await source.call_tool("roots", {})
        async with McpToolSource(
            server, protocol="legacy", roots=[docs], connect_timeout=LOADED
        ) as source:
            given = await source.call_tool("roots", {})
    assert unlisted.metadata == {"mcp.structured_content": {"advertised": False, "roots": []}}
    assert given.metadata == {
        "mcp.structured_content": {
            "advertised": True,
            "roots": [{"uri": docs.resolve().as_uri(), "name": str(docs)}],
        }
    }
