"""The soak's figures and invariants, from the store, the effects log and the lease logs.

Read after the fleet stopped (see ``soak_fleet.py``): every session's stored
document and transcript, ``EFFECTS/*.log`` (one line per side effect that
ran), ``LEASES/*.jsonl`` (every lease taken, released or lost, per owner),
the workers' logs, and what the approvers and the feeder recorded.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import attrs
from soak_fleet_agent import READ, TRANSFER, answer_text, deny_reason, open_store, user_text

import agentloop as al
import agentloop.store
import agentloop.tools
from agentloop.store import find_session_problems
from agentloop.testing import assert_transcript_valid


@attrs.frozen
class Attempt:
    """One approver's ``record_approval`` of a call and what came of it."""

    approver: int
    session_id: str
    call_id: str
    approved: bool
    outcome: str  # "recorded", "found recorded", "refused: <reason>"


@attrs.frozen
class Stop:
    """One SIGSTOP of a worker: the leases its log said it held, and when it was continued."""

    owner: str
    stopped_at: float
    held: dict[str, int]
    continued_at: float | None = None


@attrs.define
class Tally:
    lines: list[tuple[str, Any]] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)

    def add(self, name: str, value: Any) -> None:
        self.lines.append((name, value))

    def must_be_zero(self, name: str, found: int, detail: list[str]) -> None:
        self.add(name, found)
        if found:
            self.failures.append(
                f"{name}: {found}" + (f" ({'; '.join(detail[:5])})" if detail else "")
            )

    def render(self, header: str) -> str:
        width = max(len(name) for name, _ in self.lines) + 1
        body = [f"  {name + ':':<{width}} {value}" for name, value in self.lines]
        verdict = (
            ["invariants: all hold"]
            if not self.failures
            else ["INVARIANTS FAILED:", *(f"  {failure}" for failure in self.failures)]
        )
        return "\n".join([header, *body, *verdict])


def read_jsonl(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line]
        for path in sorted(folder.glob("*.jsonl"))
    }


def effect_runs(folder: Path) -> Counter[str]:
    runs: Counter[str] = Counter()
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            runs[line.split()[0]] += 1
    return runs


def takeovers(leases: dict[str, list[dict[str, Any]]]) -> int:
    """Leases granted on a session whose previous lease, another owner's, was never released
    before: it expired (its holder was killed or stopped) and was taken over."""
    acquired = grants_by_session(leases)
    released: dict[tuple[str, int], float] = {}
    for events in leases.values():
        for event in events:
            if event["event"] == "release":
                released.setdefault((event["session"], event["token"]), event["t"])
    count = 0
    for events in acquired.values():
        events.sort(key=lambda event: event["token"])
        for previous, current in itertools.pairwise(events):
            end = released.get((current["session"], previous["token"]))
            if previous["owner"] != current["owner"] and (end is None or end > current["t"]):
                count += 1
    return count


def grants_by_session(leases: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    grants: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for events in leases.values():
        for event in events:
            if event["event"] == "acquire":
                grants[event["session"]].append(event)
    return grants


def late_writes(leases: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Fenced writes that started after a newer lease of the session was granted (logged):
    the store must have refused each one (fencing); none may have committed."""
    grants = grants_by_session(leases)
    found = []
    for owner, events in leases.items():
        for write in (e for e in events if e["event"] == "write"):
            newer = [g for g in grants[write["session"]] if g["token"] > write["token"]]
            if any(g["t"] < write["start"] for g in newer):
                found.append(f"{owner} {write['operation']} {write['session']} {write['token']}")
    return found


def busy_seconds(leases: dict[str, list[dict[str, Any]]]) -> float:
    """Seconds the workers held leases (a lease a kill ended counts until its holder's last
    event on it): how much of the chaos met work in progress."""
    total = 0.0
    for owner, events in leases.items():
        if not owner.startswith("worker-"):
            continue
        start: dict[tuple[str, int], float] = {}
        end: dict[tuple[str, int], float] = {}
        for event in events:
            key = (event["session"], event["token"])
            if event["event"] == "acquire":
                start[key] = event["t"]
            end[key] = max(end.get(key, 0.0), event["t"])
        total += sum(end[key] - begun for key, begun in start.items())
    return total


def stop_figures(stops: list[Stop], leases: dict[str, list[dict[str, Any]]], tally: Tally) -> None:
    """What came of each lease a stopped worker held: taken over (meanwhile or just after
    SIGCONT) and lost with ``LeaseLostError``, or renewed and kept; and whether it went on."""
    grants = grants_by_session(leases)
    held = taken = while_stopped = lost = quiet = carried_on = 0
    for stop in stops:
        if stop.continued_at is None:
            continue
        own = leases.get(stop.owner, [])
        carried_on += any(e["event"] == "acquire" and e["t"] > stop.continued_at for e in own)
        for session_id, token in stop.held.items():
            held += 1
            ends = [e for e in own if e["session"] == session_id and e["token"] == token]
            released = min((e["t"] for e in ends if e["event"] == "release"), default=1e18)
            later = [g for g in grants[session_id] if g["token"] > token and g["t"] < released]
            if not later:
                continue  # nobody took it meanwhile: renewing it on SIGCONT is right
            taken += 1
            while_stopped += min(g["t"] for g in later) < stop.continued_at
            if any(e["event"] == "lost" for e in ends):
                lost += 1
            else:
                quiet += 1  # its drive had ended: it released (a no-op), wrote nothing more
    done = sum(stop.continued_at is not None for stop in stops)
    tally.add(
        "stops",
        f"{done} (holding a lease: {held}; taken over: {taken}, {while_stopped} of them while "
        f"stopped; LeaseLostError after SIGCONT: {lost}; drive already over, nothing more "
        f"written: {quiet}; went on with other sessions: {carried_on} of {done})",
    )
    late = late_writes(leases)
    tally.must_be_zero("fenced writes after a takeover", len(late), late)


def race_figures(
    attempts: list[Attempt], approvals: dict[str, al.store.RecordedApproval], tally: Tally
) -> dict[str, Attempt]:
    """Approval races (both approvers recorded a decision on a call); the winner of each call."""
    by_call: dict[str, list[Attempt]] = defaultdict(list)
    failed = [a.outcome for a in attempts if not a.call_id]
    for attempt in attempts:
        if attempt.call_id:
            by_call[attempt.call_id].append(attempt)
    races = conflicting = one_winner = 0
    broken: list[str] = []
    winners: dict[str, Attempt] = {}
    for call_id, tries in by_call.items():
        recorded = [a for a in tries if a.outcome == "recorded"]
        if len({a.approver for a in tries}) == 2:
            races += 1
            conflicting += tries[0].approved != tries[1].approved
            one_winner += len(recorded) == 1
        if len(recorded) != 1:
            broken.append(f"{call_id}: {[(a.approver, a.outcome) for a in tries]}")
            continue
        winners[call_id] = recorded[0]
        stored = approvals.get(call_id)
        if stored is None or stored.approved != recorded[0].approved:
            broken.append(f"{call_id}: stored {stored!r}, winner {recorded[0]!r}")
    tally.add(
        "approval races",
        f"{races} (conflicting: {conflicting}), exactly one winner: "
        f"{one_winner}; calls decided: {len(by_call)}",
    )
    tally.must_be_zero("decisions without exactly one winner", len(broken), broken)
    tally.must_be_zero("inbox queries failed", len(failed), failed)
    return winners


@attrs.define
class Sessions:
    """What the stored sessions show, summed."""

    finished: int = 0
    answered: int = 0
    calls: Counter[str] = attrs.Factory(Counter)
    outcomes: Counter[str] = attrs.Factory(Counter)
    results: dict[str, tuple[str, al.ToolResultPart]] = attrs.Factory(dict)
    approvals: dict[str, al.store.RecordedApproval] = attrs.Factory(dict)
    stranded: list[str] = attrs.Factory(list)
    invalid: list[str] = attrs.Factory(list)
    answered_turns: set[tuple[str, int]] = attrs.Factory(set)
    repeated_input: list[str] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


def describe(stored: al.store.StoredSession, transcript: list[al.Item]) -> str:
    document = stored.checkpoint
    turn = document.get("turn") or {}
    last = transcript[-1] if transcript else None
    tail = "empty" if last is None else f"{last.kind.value} {last.text_content[:30]!r}"
    if last is not None and last.kind is al.ItemKind.TOOL:
        tail = "tool result " + ",".join(
            p.call_id for p in last.parts if isinstance(p, al.ToolResultPart)
        )
    return (
        f"{stored.session_id}: status {stored.status.value}, state {document.get('state')}, "
        f"turn.round {'set' if turn.get('round') else None}, turn.paused {turn.get('paused')}, "
        f"pending_input {len(document.get('pending_input') or [])}, version {stored.version}, "
        f"last item {tail}"
    )


async def read_sessions(target: str, sessions: list[str], turns: int) -> Sessions:
    found = Sessions()
    async with open_store(target, pool_size=1) as store:
        for session_id in sessions:
            stored = await store.load(session_id)
            transcript = await store.transcript(session_id)
            if stored is None or transcript is None:
                found.stranded.append(f"{session_id}: no document")
                continue
            try:
                assert_transcript_valid(transcript)
            except AssertionError as error:
                found.invalid.append(f"{session_id}: {str(error)[:200]}")
            found.approvals.update(stored.approvals)
            tally_transcript(found, session_id, transcript)
            asked = [item.text_content for item in transcript if item.kind is al.ItemKind.USER]
            if len(asked) != len(set(asked)):
                found.repeated_input.append(f"{session_id}: {asked}")
            document = stored.checkpoint
            if (
                stored.status is al.store.SessionStatus.AWAITING_INPUT
                and document.get("state") == "IDLE"
                and not document.get("pending_input")
                and asked == [user_text(turn) for turn in range(1, turns + 1)]
                and transcript[-1].text_content == answer_text(turns)
            ):
                found.finished += 1
            else:
                found.stranded.append(describe(stored, transcript))
        for problem in await find_session_problems(store):
            found.problems.append(f"{problem.session_id}: {'; '.join(problem.problems)}")
    return found


def tally_transcript(found: Sessions, session_id: str, transcript: list[al.Item]) -> None:
    turn = 0
    for item in transcript:
        if item.kind is al.ItemKind.USER:
            turn += 1
        if item.kind is al.ItemKind.ASSISTANT and item.text_content == answer_text(turn):
            found.answered += 1
            found.answered_turns.add((session_id, turn))
        for call in item.tool_calls():
            found.calls[call.name] += 1
        for part in item.parts:
            if isinstance(part, al.ToolResultPart):
                outcome = al.tools.result_outcome(part)
                found.outcomes[outcome.value if outcome else "ran"] += 1
                found.results[part.call_id] = (part.call_id.rsplit(".", 1)[1], part)


def effect_figures(found: Sessions, runs: Counter[str], tally: Tally) -> None:
    tally.add("side-effect runs", sum(runs.values()))
    doubles = [f"{call_id} ran {n}x" for call_id, n in runs.items() if n > 1]
    tally.must_be_zero("double runs", len(doubles), doubles)
    transfers = [c for c in runs if c.endswith("." + TRANSFER)]
    unapproved = [c for c in transfers if c not in found.approvals]
    denied = [c for c in transfers if c in found.approvals and not found.approvals[c].approved]
    tally.must_be_zero("unapproved runs", len(unapproved), unapproved)
    tally.must_be_zero("denied calls that ran", len(denied), denied)
    unknown = [c for c in runs if c not in found.results]
    tally.must_be_zero("runs of calls no transcript answers", len(unknown), unknown)
    missing = [
        call_id
        for call_id, (tool, part) in found.results.items()
        if tool != READ and al.tools.result_outcome(part) is None and runs[call_id] != 1
    ]
    tally.must_be_zero("answered as run, but no run", len(missing), missing)


def decided_figures(found: Sessions, winners: dict[str, Attempt], tally: Tally) -> None:
    """Each transfer's result follows its one recorded decision (a denial names its winner)."""
    wrong: list[str] = []
    for call_id, (tool, part) in found.results.items():
        if tool != TRANSFER:
            continue
        winner = winners.get(call_id)
        outcome = al.tools.result_outcome(part)
        if winner is None:
            wrong.append(f"{call_id}: answered ({outcome}) without an approver's decision")
        elif not winner.approved and (
            outcome is not al.tools.ResultOutcome.DENIED
            or deny_reason(winner.approver) not in part.output
        ):
            wrong.append(f"{call_id}: denied by approver-{winner.approver}, result {part.output!r}")
        elif winner.approved and outcome is al.tools.ResultOutcome.DENIED:
            wrong.append(f"{call_id}: approved, result {part.output!r}")
    tally.must_be_zero("transfers not answered as decided", len(wrong), wrong)


def worker_log_figures(logs: Path, tally: Tally) -> None:
    levels: Counter[str] = Counter()
    errors: list[str] = []
    for path in logs.glob("worker-*.log"):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            levels[f"{record.get('level')}: {record.get('event')}"] += 1
            if record.get("level") in ("error", "critical"):
                detail = str(record.get("exception", "")).strip().splitlines()
                errors.append(f"{path.stem}: {record.get('event')}: {detail[-1] if detail else ''}")
    tally.add("worker log lines", ", ".join(f"{k} x{n}" for k, n in sorted(levels.items())) or 0)
    tally.add("worker errors logged", len(errors) if not errors else f"{len(errors)}: {errors[:3]}")


async def figures(
    *,
    args: argparse.Namespace,
    target: str,
    workdir: Path,
    sessions: list[str],
    attempts: list[Attempt],
    queued: list[tuple[str, int]],
    problems_seen: set[tuple[str, str]],
    kills: tuple[int, int],
    stops: list[Stop],
    exits: list[str],
    drained_in: float | None,
    finished_during_chaos: int,
    elapsed: float,
) -> tuple[str, list[str]]:
    """The figures block and the invariants that failed (none: the soak passed)."""
    tally = Tally()
    found = await read_sessions(target, sessions, args.turns)
    leases = read_jsonl(workdir / "leases")
    runs = effect_runs(workdir / "effects")
    tally.add("sessions", len(sessions))
    tally.add(
        "sessions finished", f"{found.finished} ({finished_during_chaos} when the chaos ended)"
    )
    tally.add("turns answered", f"{found.answered} (planned {len(sessions) * args.turns})")
    tally.add("tool calls", f"{sum(found.calls.values())} ({dict(sorted(found.calls.items()))})")
    tally.add("tool results", dict(sorted(found.outcomes.items())))
    effect_figures(found, runs, tally)
    tally.add("in-doubt results", found.outcomes.get(al.tools.ResultOutcome.IN_DOUBT.value, 0))
    tally.add("kills", f"{kills[0]} ({kills[1]} aimed at a model call after a tool round)")
    stop_figures(stops, leases, tally)
    tally.add("takeovers", takeovers(leases))
    busy = busy_seconds(leases)
    share = busy / max(1e-9, args.workers * elapsed)
    tally.add("leased time", f"{busy:.1f} worker-seconds ({share:.0%} of the fleet's time)")
    lost = [f"{s} turn {t}" for s, t in queued if (s, t) not in found.answered_turns]
    tally.must_be_zero("lost input", len(lost), lost)
    tally.add("input queued", len(queued))
    tally.must_be_zero("input answered twice", len(found.repeated_input), found.repeated_input)
    tally.must_be_zero("stranded sessions", len(found.stranded), found.stranded)
    seen = [f"{session_id}: {problem}" for session_id, problem in sorted(problems_seen)]
    tally.must_be_zero("consistency problems seen during the run", len(seen), seen)
    tally.must_be_zero("consistency problems at the end", len(found.problems), found.problems)
    winners = race_figures(attempts, found.approvals, tally)
    decided_figures(found, winners, tally)
    tally.must_be_zero("invalid transcripts", len(found.invalid), found.invalid)
    tally.must_be_zero("workers that exited unkilled", len(exits), exits)
    worker_log_figures(workdir / "logs", tally)
    tally.add("drained in", "not drained" if drained_in is None else f"{drained_in:.1f} s")
    tally.add("elapsed", f"{elapsed:.1f} s")
    header = (
        f"soak_fleet: backend {args.backend}, {args.sessions} sessions x {args.turns} turns, "
        f"{args.workers} workers, {args.seconds:g} s of chaos, seed {args.seed}, "
        f"latency {args.latency[0]:g}-{args.latency[1]:g} s, tools "
        f"{args.tool_latency[0]:g}-{args.tool_latency[1]:g} s, ttl {args.ttl:g} s"
    )
    return tally.render(header), tally.failures
