"""Runs vs ranks: which parsed outputs are ranks of one distributed job.

A folder may hold several runs of several jobs (the README's own layout puts
every `mlprof run` of a script in one `--output`). Cross-rank analyses (slow
rank, waiting in collectives) only mean something among the ranks of one
job. So outputs are grouped here, once:

* an output whose world size is 1 is a job of its own, and so is one with no
  rank information, unless it communicates (collectives) and runs at the same
  time as other such outputs of other processes: ranks of one job run
  concurrently, while two traces of one process, or two runs of a script,
  follow each other;
* outputs of a distributed job share the world size and the launch (torchrun's
  ``TORCHELASTIC_RUN_ID``, else ``MASTER_ADDR:MASTER_PORT``, as captured in
  the environment). They also started within :data:`SAME_LAUNCH_WINDOW_NS` of
  one another, since two launches can reuse the same address.

A rank seen twice in one job is kept once and reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlprof.analysis.communication import rank_of
from mlprof.tables.names import HOST_COMMUNICATION_REGEX
from mlprof.tables.store import TableStore

__all__ = ["RunIdentity", "JobGroups", "run_identity", "group_jobs", "SAME_LAUNCH_WINDOW_NS"]

# Ranks of one launch start within minutes of each other; separate launches of
# the same script (one run after another) usually do not.
SAME_LAUNCH_WINDOW_NS = 10 * 60 * 1_000_000_000


@dataclass(frozen=True)
class RunIdentity:
    source: str
    rank: int | None
    world_size: int | None
    host: str | None
    pid: int | None
    launch: str | None  # TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT
    start_ns: int | None
    end_ns: int | None = None  # last step end (or last op end)
    communicates: bool = False  # has collectives (device kernels or host communication ops)

    @property
    def distributed(self) -> bool:
        return self.rank is not None and self.world_size is not None and self.world_size > 1

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class JobGroups:
    jobs: list[list[RunIdentity]]  # each job's members, ranks in order
    warnings: list[str]


def run_identity(store: TableStore, source: str) -> RunIdentity:
    meta = store.metadata()
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    world = meta.get("capture.world_size", dist.get("world_size"))
    env = meta.get("profiler_metadata.environment")
    env = env if isinstance(env, dict) else {}
    launch = env.get("TORCHELASTIC_RUN_ID") or (
        f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}" if env.get("MASTER_ADDR") and env.get("MASTER_PORT") else None)
    first, last = store.rows("""SELECT min(s), max(e) FROM (
        SELECT min(start_ns) AS s, max(end_ns) AS e FROM steps
        UNION ALL SELECT min(start_ns), max(start_ns + dur_ns) FROM host_ops)""")[0]
    start = meta.get("capture.created_wall_ns")
    if not isinstance(start, int):
        start = first
    communicates = store.rows(f"""SELECT (SELECT count(*) FROM collectives) + (SELECT count(*) FROM host_ops
        WHERE regexp_matches(name, '{HOST_COMMUNICATION_REGEX}'))""")[0][0] > 0
    return RunIdentity(source=str(source), rank=rank_of(store),
                       world_size=world if isinstance(world, int) else None,
                       host=meta.get("capture.host") if isinstance(meta.get("capture.host"), str) else None,
                       pid=meta.get("capture.pid") if isinstance(meta.get("capture.pid"), int) else None,
                       launch=str(launch) if launch else None, start_ns=start, end_ns=last,
                       communicates=communicates)


def _concurrent(m: RunIdentity, job: list[RunIdentity]) -> bool:
    """``m`` runs at the same time as every member of ``job`` and is another process than each."""
    for x in job:
        if not x.communicates or None in (m.start_ns, m.end_ns, x.start_ns, x.end_ns):
            return False
        if m.pid is not None and (m.host, m.pid) == (x.host, x.pid):
            return False  # one process is one rank
        if min(m.end_ns, x.end_ns) <= max(m.start_ns, x.start_ns):
            return False
    return True


def group_jobs(members: list[RunIdentity]) -> JobGroups:
    """Members grouped into jobs (see the module doc), in the order first seen."""
    jobs: list[list[RunIdentity]] = []
    warnings: list[str] = []
    open_jobs: dict[tuple, list[list[RunIdentity]]] = {}
    unranked: list[list[RunIdentity]] = []
    for m in sorted(members, key=lambda m: (m.start_ns is None, m.start_ns or 0, m.source)):
        if m.rank is None or m.world_size is None:
            job = next((j for j in unranked if m.communicates and _concurrent(m, j)), None)
            if job is None:
                job = [m]
                unranked.append(job)
                jobs.append(job)
            else:
                job.append(m)
            continue
        if not m.distributed:
            jobs.append([m])
            continue
        candidates = open_jobs.setdefault((m.world_size, m.launch), [])
        job = next((j for j in candidates if m.start_ns is None or j[0].start_ns is None
                    or abs(m.start_ns - j[0].start_ns) <= SAME_LAUNCH_WINDOW_NS), None)
        if job is None:
            job = []
            candidates.append(job)
            jobs.append(job)
        twin = next((x for x in job if x.rank == m.rank), None)
        if twin is not None:
            warnings.append(f"rank {m.rank} appears twice in one job ({twin.source} and {m.source}); "
                            f"the second is left out of cross-rank analysis")
            continue
        job.append(m)
    for job in jobs:
        job.sort(key=lambda m: (m.rank is None, m.rank or 0, m.source))
    return JobGroups(jobs=jobs, warnings=warnings)
