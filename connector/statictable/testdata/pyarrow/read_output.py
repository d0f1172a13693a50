"""Reads an ArrivalOrderTableSink output directory with pyarrow.

Usage: read_output.py DIR

Reads DIR/_weir_manifest.json, opens every table it lists with
pyarrow.parquet (files not listed are ignored, as readers must) and prints
to stdout, as JSON: the pyarrow version and, per listed table, its name,
the row count the manifest gives, the schema pyarrow sees and its rows,
each value encoded as the weir value it stands for (see weirmap.py).
"""

import json
import os
import sys

import pyarrow as pa

import weirmap


def main(out):
    with open(os.path.join(out, "_weir_manifest.json")) as f:
        manifest = json.load(f)
    tables = []
    for t in manifest["tables"]:
        cols, rows = weirmap.read(os.path.join(out, t["name"]))
        tables.append({"name": t["name"], "manifest_rows": t["rows"], "columns": cols, "rows": rows})
    json.dump({"pyarrow": pa.__version__, "tables": tables}, sys.stdout)


if len(sys.argv) != 2:
    sys.exit(__doc__)
main(sys.argv[1])
