"""The driver-with-a-store tests of ``tests/loop/test_persistence.py``, on a real PostgreSQL.

Same tests (versions, claims, recorded decisions, leases, failed saves), with
the ``store`` fixture replaced by a ``PostgresSessionStore`` on this test's
own schema of the embedded server (``conftest.py``).
"""

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentloop.store import PostgresSessionStore, SessionStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "loop"))

from test_persistence import (
    test_a_call_claimed_by_another_driver_is_answered_in_doubt,
    test_a_crash_between_claim_and_result_is_in_doubt_never_rerun,
    test_a_decision_that_conflicts_with_a_recorded_one_is_refused,
    test_a_denial_recorded_by_another_process_is_honoured,
    test_a_failed_input_save_raises_and_changes_nothing,
    test_a_failed_model_call_keeps_the_input_and_retries_after_a_resume,
    test_a_failed_step_save_carries_the_step_and_can_be_retried,
    test_a_lease_lost_before_a_save_refuses_the_save,
    test_a_lease_of_another_session_is_refused,
    test_a_lease_taken_over_refuses_the_old_drivers_claim_and_save,
    test_a_started_driver_bases_later_saves_on_its_own,
    test_an_approval_recorded_by_another_process_is_honoured,
    test_an_approval_recorded_for_other_input_is_not_replayed,
    test_an_edited_approval_is_bound_to_the_edited_input,
    test_input_is_durable_before_the_model_is_called,
    test_save_is_refused_without_a_store_or_inside_a_failed_driver,
    test_two_drivers_on_one_session_the_later_save_is_refused,
)

pytestmark = pytest.mark.anyio

__all__ = [
    "test_a_call_claimed_by_another_driver_is_answered_in_doubt",
    "test_a_crash_between_claim_and_result_is_in_doubt_never_rerun",
    "test_a_decision_that_conflicts_with_a_recorded_one_is_refused",
    "test_a_denial_recorded_by_another_process_is_honoured",
    "test_a_failed_input_save_raises_and_changes_nothing",
    "test_a_failed_step_save_carries_the_step_and_can_be_retried",
    "test_a_lease_lost_before_a_save_refuses_the_save",
    "test_a_lease_of_another_session_is_refused",
    "test_a_lease_taken_over_refuses_the_old_drivers_claim_and_save",
    "test_an_approval_recorded_by_another_process_is_honoured",
    "test_an_approval_recorded_for_other_input_is_not_replayed",
    "test_an_edited_approval_is_bound_to_the_edited_input",
    "test_a_failed_model_call_keeps_the_input_and_retries_after_a_resume",
    "test_input_is_durable_before_the_model_is_called",
    "test_save_is_refused_without_a_store_or_inside_a_failed_driver",
    "test_a_started_driver_bases_later_saves_on_its_own",
    "test_two_drivers_on_one_session_the_later_save_is_refused",
]


@pytest.fixture
async def store(postgres_uri: str) -> AsyncIterator[SessionStore]:
    async with PostgresSessionStore(postgres_uri) as opened:
        yield opened
