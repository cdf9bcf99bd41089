"""Durable execution of agentloop sessions on an existing engine.

One sub-package per engine: :mod:`agentloop.durable.dbos` (DBOS Transact,
``pip install 'agentloop-runtime[dbos]'``). See ``docs/durable.md``.
"""

__all__: list[str] = []
