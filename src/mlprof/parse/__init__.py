"""Parsers: raw captures and Kineto traces into the tables of mlprof.tables."""

from mlprof.parse.pipeline import ParseOptions, ParseResult, parse_path

__all__ = ["ParseOptions", "ParseResult", "parse_path"]
