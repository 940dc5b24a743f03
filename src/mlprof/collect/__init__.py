"""Collection: the only part of mlprof that talks to torch.

Importing this package does not import torch; the modules that need it import
it when a profiler is built.
"""
