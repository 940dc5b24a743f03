"""The ``mlprof`` command line (thin: options -> library calls -> output)."""
