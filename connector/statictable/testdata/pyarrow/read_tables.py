"""Reads Parquet files with pyarrow.

Usage: read_tables.py FILE...

Prints to stdout, as JSON: the pyarrow version and, per file, its path,
the schema pyarrow sees (physical, logical and converted type of each
column) and its rows, each value encoded as the weir value it stands for
(see weirmap.py). Used on files other writers (parquet-go) produced.
"""

import json
import sys

import pyarrow as pa

import weirmap


def main(paths):
    tables = []
    for path in paths:
        cols, rows = weirmap.read(path)
        tables.append({"file": path, "columns": cols, "rows": rows})
    json.dump({"pyarrow": pa.__version__, "tables": tables}, sys.stdout)


if len(sys.argv) < 2:
    sys.exit(__doc__)
main(sys.argv[1:])
