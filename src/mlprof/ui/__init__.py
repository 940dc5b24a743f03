"""The web dashboard (``mlprof ui``): a read-only ASGI presenter over parsed tables.

Importing this package needs no web framework; ``mlprof.ui.server`` does
(starlette, uvicorn).
"""

__all__: list[str] = []
