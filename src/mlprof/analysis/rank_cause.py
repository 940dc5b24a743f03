"""Why a slow rank is slow: its attribution against the median of the other ranks'.

A slow rank (:mod:`mlprof.analysis.cluster`) is found on a coarse split of
its step (compute, communication transit, device idle). Its *cause* is read
from the attribution every rank already has, never redefined here:

* the host phases of :mod:`mlprof.tables.phases` (``phase_spans`` summed per
  step by :func:`mlprof.analysis.steps.step_breakdown`): data loading, forward,
  backward, optimizer, garbage collection, Python outside ops, other ops;
* on device traces, the device-idle causes of the same table, and device
  compute per module;
* the wait for a CPU core of the stepping thread (``steps.cpu_wait_ns``, the
  measure of the ``cpu_contention`` finding): it overlaps the phases (a busy
  neighbour stretches whatever phase runs), so it is the cause when its excess
  is larger than any one phase's and makes up at least half of the rank's;
* the call site of a phase (:func:`mlprof.analysis.call_sites.call_sites`)
  and the module of forward/backward/device time
  (:func:`mlprof.analysis.modules.module_tree`);
* the input size of the outermost module (``module_calls.input_shape``).

:func:`rank_attribution` reduces one rank to means per step (it travels back
from the worker that parsed the rank); :func:`slow_rank_cause` compares a slow
rank with the others: the component whose excess over the others' median is
largest, in ns per step and as a share of the others' wait in collectives.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections import Counter

from mlprof.analysis.call_sites import call_sites
from mlprof.analysis.host import step_cpu_waits_by_step
from mlprof.analysis.modules import module_tree
from mlprof.analysis.steps import HOST_FIELDS, IDLE_FIELDS, StepBreakdown
from mlprof.tables.phases import CAUSE_LABELS, PHASE_LABELS
from mlprof.tables.store import TableStore

__all__ = ["rank_attribution", "slow_rank_cause", "JobBaseline", "median_without", "CONTENTION_SHARE", "INPUT_DIFFERS", "CAUSE_NAMES"]

# The wait for a core is the cause when it makes up this share of the rank's excess or more.
CONTENTION_SHARE = 0.5
# The outermost module's input differing by this fraction of its elements from the others' is a cause.
INPUT_DIFFERS = 0.10
# Kept per rank: the largest call sites of each phase, the largest modules.
_SITES_PER_PHASE = 5
_MODULES = 40

# Causes that are not a phase of tables.phases.
CAUSE_NAMES = {"cpu_contention": "waiting for a CPU core (host CPU contention)",
               "device_compute": "device compute", "input_size": "a different input size",
               "communication_transit": "slower transfers in collectives"}


def _mean(values: list) -> float:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else 0.0


def _numel(shape: str | None) -> int | None:
    try:
        dims = json.loads(shape or "null")
    except ValueError:
        return None
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return math.prod(dims)


def rank_attribution(store: TableStore, steps: list[StepBreakdown]) -> dict:
    """Means per step of one rank's attribution (plain data for :func:`slow_rank_cause`)."""
    n = max(len(steps), 1)
    host = {phase: _mean([getattr(s, field) for s in steps]) for phase, field in HOST_FIELDS.items()}
    has_device = any(s.computing_ns is not None for s in steps)
    idle = {c: _mean([getattr(s, f) for s in steps]) for c, f in IDLE_FIELDS.items()} if has_device else None
    waits = step_cpu_waits_by_step(store)
    cpu_wait = None if not waits else _mean([w for _, w in waits.values()])
    sites: dict[str, dict[str, float]] = {}
    for row in call_sites(store):
        per_phase = sites.setdefault(row["phase"], {})
        if len(per_phase) < _SITES_PER_PHASE and row["call_site"]:
            # The phase's time per step shared by the site's share of the phase's samples.
            per_phase[row["call_site"]] = host.get(row["phase"], 0.0) * float(row["share_of_phase"])
    mods = sorted(module_tree(store), key=lambda m: -(m.self_ns + m.backward_self_ns + m.device_self_ns))
    modules = {m.path: {"forward": m.self_ns / n, "backward": m.backward_self_ns / n, "device": m.device_self_ns / n}
               for m in mods[:_MODULES]}
    shapes = Counter(s for (s,) in store.rows(
        "SELECT input_shape FROM module_calls WHERE depth = 0 AND input_shape IS NOT NULL"))
    shape = shapes.most_common(1)[0][0] if shapes else None
    return {"host": host, "idle": idle, "cpu_wait_ns": cpu_wait, "sites": sites, "modules": modules,
            "input_shape": shape, "input_elements": _numel(shape)}


def _label(cause: str, view: str) -> str:
    if view == "device idle":
        return "device idle: " + CAUSE_LABELS.get(cause, cause)
    return PHASE_LABELS.get(cause) or CAUSE_NAMES.get(cause, cause)


def _value(a: dict, key: tuple) -> float | None:
    """One figure of an attribution: ("host", phase), ("idle", cause), ("cpu_wait",), ("site", phase, site),
    ("module", kind, path), ("input",); sites and modules a rank lacks count 0."""
    if key[0] == "host":
        return a["host"].get(key[1])
    if key[0] == "idle":
        return (a.get("idle") or {}).get(key[1])
    if key[0] == "cpu_wait":
        return a.get("cpu_wait_ns")
    if key[0] == "site":
        return a["sites"].get(key[1], {}).get(key[2], 0.0)
    if key[0] == "module":
        return a["modules"].get(key[2], {}).get(key[1], 0.0)
    return a.get("input_elements") or None


def median_without(vals: list[float], mine: float) -> float | None:
    """Median of sorted ``vals`` less one value equal to ``mine`` (None when it is not there or alone)."""
    i = bisect_left(vals, mine)
    n = len(vals) - 1
    if n <= 0 or i >= len(vals) or vals[i] != mine:
        return None

    def at(j: int) -> float:
        return vals[j] if j < i else vals[j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


class JobBaseline:
    """The other ranks' median of any attribution figure, for any rank of the job, without a pass over
    the ranks per slow rank: each figure's values over all ranks are sorted once, and a rank's own value
    is left out of the median by its position (1,024 ranks: O(log n) a query)."""

    def __init__(self, attributions: list[dict | None]) -> None:
        self.ranks = [a for a in attributions if a]
        self._sorted: dict[tuple, list[float]] = {}
        self._shapes: Counter | None = None

    def median_without(self, key: tuple, mine: float | None) -> float | None:
        """Median of the figure over the ranks other than the one whose value is ``mine`` (None: no others)."""
        if mine is None:
            return None
        vals = self._sorted.get(key)
        if vals is None:
            vals = self._sorted[key] = sorted(v for v in (_value(a, key) for a in self.ranks) if v is not None)
        return median_without(vals, mine)

    def others_shape(self, mine: str | None) -> str | None:
        """The most common outermost input shape among the other ranks."""
        if self._shapes is None:
            self._shapes = Counter(a.get("input_shape") for a in self.ranks if a.get("input_shape"))
        rest = Counter(self._shapes)
        if mine:
            rest[mine] -= 1
        top = [(shape, n) for shape, n in rest.most_common() if n > 0]
        return top[0][0] if top else None

    def top_excess(self, mine: dict[str, float], key) -> tuple[str | None, float]:
        """The name in ``mine`` whose value exceeds the others' median the most (``key(name)``: its figure)."""
        best, best_ns = None, 0.0
        for name, value in mine.items():
            base = self.median_without(key(name), value)
            if base is not None and value - base > best_ns:
                best, best_ns = name, value - base
        return best, best_ns


def slow_rank_cause(me: dict | None, job: JobBaseline, excess_in: str, excess_ns: float,
                    others_wait_ns: float, host_collectives: bool = False) -> dict | None:
    """The cause of a slow rank's excess (``excess_in``: compute, communication or free; ``excess_ns`` per step).

    ``me``: :func:`rank_attribution` of the slow rank; ``job``: the :class:`JobBaseline` of all the ranks
    of its job (``me`` included); ``others_wait_ns``: the others' median wait in collectives per step;
    ``host_collectives``: the collectives run on the host's CPU (gloo), so their transfers wait for a core too.
    None without attribution.
    """
    if not me or len(job.ranks) < 2:
        return None

    def share(ns: float) -> float | None:
        return round(ns / others_wait_ns, 4) if others_wait_ns > 0 else None

    components: list[dict] = []

    def add(cause: str, view: str, key: tuple) -> None:
        mine = _value(me, key)
        base = job.median_without(key, mine)
        if mine is None or base is None:
            return
        ns = mine - base
        components.append({"cause": cause, "label": _label(cause, view), "view": view, "excess_ns": ns,
                           "share_of_others_wait": share(ns)})

    if excess_in == "communication":
        components.append({"cause": "communication_transit", "label": _label("communication_transit", "host"),
                           "view": "communication", "excess_ns": excess_ns, "share_of_others_wait": share(excess_ns)})
    elif excess_in == "free" and me.get("idle") is not None:
        for cause in me["idle"]:
            add(cause, "device idle", ("idle", cause))
    elif excess_in == "compute" and me.get("idle") is not None:
        components.append({"cause": "device_compute", "label": _label("device_compute", "device"), "view": "device",
                           "excess_ns": excess_ns, "share_of_others_wait": share(excess_ns)})
    else:
        for phase in me["host"]:
            if phase != "communication":  # the others' waiting, not this rank's work
                add(phase, "host", ("host", phase))
    add("cpu_contention", "host", ("cpu_wait",))
    components = [c for c in components if c["excess_ns"] > 0]
    if not components:
        return None
    components.sort(key=lambda c: -c["excess_ns"])
    wait = next((c for c in components if c["cause"] == "cpu_contention"), None)
    # Waiting for a core stretches the phases that run meanwhile: extra work of one phase on a loaded
    # host shows as a larger excess of that phase than of the wait, a busy neighbour as a wait larger
    # than any one phase's excess and making up most of the rank's.
    # A host collective's transfer is this rank's CPU work: a busy neighbour stretches it as it stretches a
    # phase (a 4-rank gloo job with a busy core under rank 2: transit +24 ms, wait for a core +15 ms per step),
    # where a slow link would leave the wait for a core where the others' is.
    stretched = wait is not None and excess_ns > 0 and wait["excess_ns"] >= CONTENTION_SHARE * excess_ns
    if stretched and (components[0] is wait or (excess_in == "communication" and host_collectives)):
        top = wait
    else:
        top = next(c for c in components if c["cause"] != "cpu_contention")
    cause = {**top, "call_site": None, "module": None, "input_shape": None,
             "components": [{**c, "excess_ns": round(c["excess_ns"])} for c in components[:6]]}
    cause["excess_ns"] = round(top["excess_ns"])
    phase = top["cause"] if top["view"] == "host" else None
    if phase in me["sites"]:
        site, _ = job.top_excess(me["sites"][phase], lambda name: ("site", phase, name))
        cause["call_site"] = site or next(iter(me["sites"][phase]), None)
    kind = {"forward": "forward", "backward": "backward"}.get(phase) or ("device" if top["cause"] == "device_compute"
                                                                          else None)
    if kind and me["modules"]:
        cause["module"], _ = job.top_excess({p: v[kind] for p, v in me["modules"].items()},
                                            lambda name: ("module", kind, name))
    mine_in = _value(me, ("input",))
    their_in = job.median_without(("input",), mine_in)
    if kind and mine_in and their_in and abs(mine_in - their_in) > INPUT_DIFFERS * their_in:
        others_shape = job.others_shape(me.get("input_shape"))
        cause.update(cause="input_size", label=f"{_label('input_size', 'host')} ({me['input_shape']} vs "
                                               f"{others_shape} on the others), in {top['label']}",
                     input_shape=me["input_shape"])
    return cause
