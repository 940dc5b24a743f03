"""What to collect and when: the option model (every option of ``mlprof.profile``, ``mlprof run``, the
dynamic config and ``MLPROF_PROFILING_OPTIONS``, defined once), the profiler's enums and config
dataclasses built from it, and the step schedule. Plain Python, no torch: the CLI, the dynamic-profiling
watcher and the parser read them too."""
