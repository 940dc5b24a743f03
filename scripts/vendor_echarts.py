#!/usr/bin/env python3
"""Vendor Apache ECharts' browser build into the dashboard's static files, from the npm registry.

The dashboard must work offline and under a CSP of ``script-src 'self'``, so
the chart library ships inside the package (docs/ui.md says why ECharts).
This script makes that file reproducible: it downloads the pinned npm
tarball, checks it against the registry's published sha512 integrity, and
copies ``dist/echarts.min.js`` with the licence files next to the other
static files. Run it to update: change VERSION and INTEGRITY (``npm view
echarts@X dist.integrity``), run, commit the three files.

    python scripts/vendor_echarts.py            # fetch, verify, copy
    python scripts/vendor_echarts.py --check    # verify the vendored file matches the tarball
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "6.1.0"
INTEGRITY = "sha512-q0yaFPggC9FUdsWH4blavRWFmxdrIodbkoKNAjJudAI6CA9gNPxHtV2RcZNEepZVlk4yvBYkOkbk6HIVpIyHZA=="
URL = f"https://registry.npmjs.org/echarts/-/echarts-{VERSION}.tgz"
STATIC = Path(__file__).resolve().parents[1] / "src" / "mlprof" / "ui" / "static"
# tarball member -> vendored file name
FILES = {"package/dist/echarts.min.js": "echarts.min.js",
         "package/LICENSE": "echarts.LICENSE.txt",
         "package/NOTICE": "echarts.NOTICE.txt"}


def fetch() -> dict[str, bytes]:
    with urllib.request.urlopen(URL, timeout=120) as r:
        blob = r.read()
    got = "sha512-" + base64.b64encode(hashlib.sha512(blob).digest()).decode()
    if got != INTEGRITY:
        sys.exit(f"vendor_echarts: {URL}: integrity {got} != pinned {INTEGRITY}")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member, name in FILES.items():
            f = tar.extractfile(member)
            if f is None:
                sys.exit(f"vendor_echarts: {member} missing from the tarball")
            out[name] = f.read()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only verify the vendored files")
    args = parser.parse_args()
    files = fetch()
    if args.check:
        bad = [n for n, data in files.items() if (STATIC / n).read_bytes() != data]
        if bad:
            sys.exit(f"vendor_echarts: differ from echarts {VERSION}: {', '.join(bad)}")
        print(f"vendored files match echarts {VERSION}")
        return
    for name, data in files.items():
        (STATIC / name).write_bytes(data)
        print(f"wrote {STATIC / name} ({len(data):,} bytes)")


if __name__ == "__main__":
    main()
