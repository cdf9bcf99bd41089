"""The tools and permissions packages' public surfaces."""

from __future__ import annotations

import types

import pytest

import agentloop
import agentloop.permissions
import agentloop.tools

NOT_YET_AT_THE_ROOT = {
    agentloop.tools: {
        "PermissionsFunction",
        "ToolInDoubtError",
        "argument_converter",
        "compare_catalogs",
        "structure_value",
        "synthesized_result",
    },
    agentloop.permissions: {
        "NetworkPolicy",
        "PendingPermission",
        "RuleAction",
        "open_beneath",
        "resolve_path",
    },
}


def order(name: str) -> tuple[int, str]:  # constants, classes, then functions, as at the root
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("package", [agentloop.tools, agentloop.permissions])
def test_exports_are_sorted_documented_and_match_the_root(package: types.ModuleType) -> None:
    names = package.__all__
    assert list(names) == sorted(names, key=order)
    assert len(set(names)) == len(names)
    for name in names:
        value = getattr(package, name)
        if isinstance(value, type):
            assert value.__doc__, name
        if hasattr(agentloop, name):
            assert getattr(agentloop, name) is value, name
        else:
            assert name in NOT_YET_AT_THE_ROOT[package], name
