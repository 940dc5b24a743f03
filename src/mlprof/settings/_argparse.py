"""argparse pieces shared by every command line flag mlprof defines (CLI and option model).

No mlprof imports: ``mlprof.collect`` (the option model) and ``mlprof.cli`` both use it.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["ListOption", "finite_float"]


def finite_float(text: str) -> float:
    """argparse type: a real number; nan and inf are refused (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


class ListOption(argparse.Action):
    """A list option, spelled either way: repeated (``--x a --x b``) or as a comma list (``--x a,b``).

    The first use replaces the default; ``choices`` are checked per item.
    """

    def __init__(self, option_strings, dest, choices=None, **kwargs):
        self.item_choices = tuple(choices) if choices is not None else None
        if self.item_choices and kwargs.get("metavar") is None:
            kwargs["metavar"] = "{" + ",".join(self.item_choices) + "}"
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        items = [v.strip() for v in str(values).split(",") if v.strip()]
        if self.item_choices is not None:
            for item in items:
                if item not in self.item_choices:
                    parser.error(f"argument {option_string}: invalid choice: {item!r} "
                                 f"(choose from {', '.join(self.item_choices)})")
        current = getattr(namespace, self.dest, None)
        fresh = current is None or current is self.default
        setattr(namespace, self.dest, ([] if fresh else list(current)) + items)
