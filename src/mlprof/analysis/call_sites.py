"""Where the host time of each phase goes in the user's Python code.

From the sampled Python stacks (``python_samples``/``python_stacks``) and the
attribution (``phase_spans``): each sample taken inside a step is given the
host phase at its time, and a phase's time is shared among the call sites of
its samples in proportion to their counts. So the Python-outside-ops time of
a per-step ``torch.save`` lands on the user's line that calls it, and the
forward time of a Python loop of tiny ops on the loop's line.
"""

from __future__ import annotations

from mlprof.tables.store import TableStore

__all__ = ["call_sites", "phase_ns", "side_work", "site_samples_by_step"]

_UNNEST_USER_FRAMES = """, unnest(from_json(k.user_frames, '["VARCHAR"]')) AS u(site)"""
# Every user frame of the stack, as a call site ('file:line function' split into its parts).
_INCLUSIVE_SITE = """u.site AS call_site, regexp_extract(u.site, '^(.*):[0-9]+ [^ ]*$', 1) AS call_site_file,
    CAST(regexp_extract(u.site, ':([0-9]+) [^ ]*$', 1) AS BIGINT) AS call_site_line,
    regexp_extract(u.site, ' ([^ ]*)$', 1) AS call_site_function, k.leaf"""


# The samples inside the steps' host phase spans (``p``), with their stacks (``k``): the join every estimate
# from the stack samples starts from.
_SAMPLED_FROM = """
    FROM python_samples s
    JOIN phase_spans p ON p.window_index = s.window_index AND p.view = 'host'
     AND s.ts_ns >= p.start_ns AND s.ts_ns < p.end_ns
    JOIN python_stacks k ON k.window_index = s.window_index AND k.stack_id = s.stack_id"""


def _phase_time_sql(step_filter: str = "") -> str:
    """The CTEs ``phase_time`` (host time per phase) and ``all_time`` over every step of the windows the
    sampler covered, sampled or not (after a CTE ``sampled``). With steps shorter than the sampling interval
    only some steps hold a sample, and an estimate over those alone read a 34% side work as 15% of all steps
    (4.6 ms steps, 10 ms interval); the samples stand for every step of their window."""
    return f"""
        sampled_windows AS (SELECT DISTINCT window_index FROM sampled),
        phase_time AS (
            SELECT p.phase, sum(p.dur_ns) AS phase_ns FROM phase_spans p JOIN sampled_windows USING (window_index)
            WHERE p.view = 'host' AND p.step IS NOT NULL {step_filter} GROUP BY p.phase),
        all_time AS (SELECT sum(phase_ns) AS steps_ns FROM phase_time)"""


def call_sites(store: TableStore, phase: str | None = None, step: int | None = None,
               limit: int | None = None, inclusive: bool = False) -> list[dict]:
    """Rows of (phase, call_site, samples, estimated time), largest first.

    ``est_ns`` is the phase's time in the steps (of the windows the sampler
    covered) times the site's share of the phase's samples; ``share_of_phase``
    and ``share_of_steps`` are fractions of that phase and of those steps' time. With
    ``inclusive`` a sample counts for every line of the user's code on its
    stack (a loop that calls the model gets the model's time too), so the
    rows of a phase may add up to more than the phase.
    """
    step_filter = "" if step is None else "WHERE p.step = ?"
    params: list = [] if step is None else [step, step]  # the samples', then the phase time's
    phase_filter = ""
    if phase is not None:
        phase_filter = "WHERE s.phase = ?"
        params.append(phase)
    site = (_INCLUSIVE_SITE if inclusive else
            "k.call_site, k.call_site_file, k.call_site_line, k.call_site_function, k.leaf")
    rows = store.dicts(f"""
        WITH sampled AS (
            SELECT DISTINCT s.window_index, s.ts_ns, p.step, p.phase, {site}
            {_SAMPLED_FROM}
            {_UNNEST_USER_FRAMES if inclusive else ""}
            {step_filter}),
        {_phase_time_sql("" if step is None else "AND p.step = ?")},
        per_site AS (
            SELECT phase, call_site, any_value(call_site_file) AS file, any_value(call_site_line) AS line,
                   any_value(call_site_function) AS function, count(*) AS samples,
                   -- Ties go to the first leaf by name: plain mode() kept whichever it met first.
                   mode() WITHIN GROUP (ORDER BY leaf) AS leaf
            FROM sampled GROUP BY phase, call_site),
        per_phase AS (SELECT phase, count(DISTINCT (window_index, ts_ns)) AS phase_samples FROM sampled GROUP BY phase)
        SELECT s.phase, s.call_site, s.file, s.line, s.function, s.leaf, s.samples,
               CAST(t.phase_ns * s.samples / n.phase_samples AS BIGINT) AS est_ns,
               s.samples / n.phase_samples AS share_of_phase,
               t.phase_ns * s.samples / n.phase_samples / a.steps_ns AS share_of_steps
        FROM per_site s JOIN per_phase n USING (phase) JOIN phase_time t USING (phase), all_time a
        {phase_filter}
        ORDER BY est_ns DESC, s.call_site""", params)
    return rows[:limit] if limit else rows


# A sampled stack is the training step's own work when it runs inside one of these (a module's forward, a
# loss, autograd, an optimizer, a DataLoader, a compiled graph, a collective); anything else the user's line
# does between them is work the step takes on besides.
_STEP_CORE_FRAMES = (r"torch/nn/modules/|torch/nn/functional\.py|torch/autograd/|torch/_tensor\.py:[0-9]+ backward"
                     r"|torch/optim/|torch/utils/data/|torch/_dynamo/|torch/_functorch/|torch/_inductor/"
                     r"|torch/distributed/|torch/nn/parallel/|torch/amp/|lightning/|transformers/trainer")


def side_work(store: TableStore, limit: int = 5) -> list[dict]:
    """The user's functions that do work in the steps outside the step's core (no module forward, loss,
    backward, optimizer or data loader on the stack: a ``copy.deepcopy(model)`` per step, metrics in Python
    loops, a checkpoint), in every phase but garbage collection, largest first.

    Rows: ``function`` (file and function), ``call_site`` (its line with the most such samples), ``lines``
    ``line_samples`` and ``line_est_ns`` (all its lines, most samples first), ``leaf``,
    ``samples``, ``est_ns`` (each sample worth its phase's time over its phase's samples, as
    :func:`call_sites` shares it), ``share_of_steps``, ``phases`` (est_ns by phase).
    """
    rows = store.dicts(f"""
        WITH sampled AS (
            SELECT DISTINCT s.window_index, s.ts_ns, p.step, p.phase, k.call_site, k.call_site_file,
                   k.call_site_function, k.leaf,
                   regexp_matches(coalesce(k.frames, ''), '{_STEP_CORE_FRAMES}') AS core
            {_SAMPLED_FROM}),
        {_phase_time_sql()},
        per_phase AS (SELECT phase, count(*) AS phase_samples FROM sampled GROUP BY phase),
        side AS (
            SELECT s.*, t.phase_ns / n.phase_samples AS worth_ns FROM sampled s
            JOIN per_phase n USING (phase) JOIN phase_time t USING (phase)
            WHERE NOT s.core AND s.phase <> 'gc' AND s.call_site IS NOT NULL),
        per_line AS (
            SELECT call_site_file AS file, call_site_function AS function, call_site, count(*) AS samples,
                   CAST(sum(worth_ns) AS BIGINT) AS est_ns
            FROM side GROUP BY ALL),
        top_line AS (
            SELECT file, function, arg_max(call_site, samples) AS call_site,
                   list(call_site ORDER BY samples DESC, call_site) AS lines,
                   list(samples ORDER BY samples DESC, call_site) AS line_samples,
                   list(est_ns ORDER BY samples DESC, call_site) AS line_est_ns FROM per_line GROUP BY ALL),
        per_phase_fn AS (
            SELECT call_site_file AS file, call_site_function AS function, phase, sum(worth_ns) AS est_ns
            FROM side GROUP BY ALL)
        SELECT s.call_site_file AS file, s.call_site_function AS function, any_value(l.call_site) AS call_site,
               any_value(l.lines) AS lines, any_value(l.line_samples) AS line_samples,
               any_value(l.line_est_ns) AS line_est_ns,
               mode() WITHIN GROUP (ORDER BY s.leaf) AS leaf, count(*) AS samples,
               CAST(sum(s.worth_ns) AS BIGINT) AS est_ns, sum(s.worth_ns) / any_value(a.steps_ns) AS share_of_steps,
               (SELECT map(list(phase ORDER BY phase), list(CAST(est_ns AS BIGINT) ORDER BY phase))
                FROM per_phase_fn f WHERE f.file = s.call_site_file AND f.function = s.call_site_function) AS phases
        FROM side s JOIN top_line l ON l.file = s.call_site_file AND l.function = s.call_site_function, all_time a
        GROUP BY s.call_site_file, s.call_site_function
        ORDER BY est_ns DESC, file, function LIMIT {int(limit)}""")
    for r in rows:
        r["phases"] = dict(r["phases"]) if r["phases"] is not None else {}
    return rows


def site_samples_by_step(store: TableStore) -> list[tuple]:
    """(window, step, call_site, leaf, samples, weight_ns) for every user's line sampled in a step: where in
    the window a line's samples fall (step_outliers: the line its slow steps run)."""
    return store.rows(f"""
        WITH sampled AS (SELECT DISTINCT s.window_index, s.ts_ns, p.step, k.call_site, k.leaf, s.weight_ns
                         {_SAMPLED_FROM} WHERE p.step IS NOT NULL AND k.call_site IS NOT NULL)
        SELECT window_index, step, call_site, leaf, count(*), sum(weight_ns) FROM sampled
        GROUP BY ALL ORDER BY ALL""")


def phase_ns(store: TableStore, phase: str, step: int | None = None) -> int:
    """Host time of ``phase`` in the captured steps (or in step ``step``), from the attribution."""
    step_filter = "" if step is None else "AND step = ?"
    params: list = [phase] if step is None else [phase, step]
    (total,) = store.rows(f"""SELECT coalesce(sum(dur_ns), 0) FROM phase_spans
                              WHERE view = 'host' AND step IS NOT NULL AND phase = ? {step_filter}""", params)[0]
    return int(total)
