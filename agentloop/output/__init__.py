"""Structured output: an agent's answer as a validated, typed value (see docs/output.md)."""
