"""Writes Parquet tables with pyarrow for the StaticTableSource tests.

Usage: write_tables.py matrix OUT
       write_tables.py sink-input DIR EXPECTED

matrix writes:

OUT/read/<time>_<variant>.parquet   tables weir must read: one table of
    every Parquet physical type and the logical types pyarrow writes, with
    and without annotations, negative values, extremes, NaN/±Inf and a null
    in every column, written with every codec pyarrow offers, dictionary
    encoding on and off, data page v1 and v2, small row groups and pages;
    and variants (decimals stored as INT32/INT64, INT96 timestamps, format
    version 1.0, non-default encodings).
OUT/refused/<case>/<time>_<case>.parquet   one table per directory that
    weir must refuse, each with an error naming the file and the column.
OUT/expected.json   per table: its file, the options it was written
    with, its row group count, the schema pyarrow sees in the file
    (physical, logical and converted type of each column) and its rows as
    pyarrow reads them back, each value encoded as the weir value the
    documented mapping gives (weirmap.py): ["bool", b], ["int64", "n"],
    ["uint64", "n"], ["float64", "repr"], ["string", s], ["bytes", "hex"],
    or null; and per refused table, its file, the column and what the
    error must say.

sink-input writes 4 tables of the same columns plus a unique int64 "id"
into DIR (snappy, zstd, gzip, uncompressed; dictionary on and off; page
v1 and v2), and to EXPECTED, as JSON, each table's name and rows.

Every table is written under a hidden name and renamed (tables appear
whole). The output is the same on every run.
"""

import decimal
import json
import math
import os
import struct
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

import weirmap

D = decimal.Decimal
decimal.getcontext().prec = 100


def dec(p, s):
    """Extremes and small values of DECIMAL(p, s)."""
    top = D(10**p - 1).scaleb(-s)
    one = D(1).scaleb(-s)
    return [-top, top, D(0).quantize(one), -one, one, D("-1.5").quantize(one) if s else D(-2)]


F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
F32_MIN_SUB = struct.unpack("<f", struct.pack("<I", 0x00000001))[0]

# name, arrow type, values (the last row of the table is all nulls, and
# each column has a null somewhere before it too).
COLUMNS = [
    ("bool", pa.bool_(), [True, False, None, True]),
    ("int8", pa.int8(), [-1, -(2**7), 2**7 - 1, 0, None]),
    ("int16", pa.int16(), [-1, -(2**15), 2**15 - 1, None]),
    ("int32", pa.int32(), [-1, -(2**31), 2**31 - 1, 0, None, -2]),  # INT32, no annotation
    ("int64", pa.int64(), [-1, -(2**63), 2**63 - 1, 0, None]),  # INT64, no annotation
    ("uint8", pa.uint8(), [2**8 - 1, 0, 2**7, None]),
    ("uint16", pa.uint16(), [2**16 - 1, 0, 2**15, None]),
    ("uint32", pa.uint32(), [2**32 - 1, 0, 2**31, None]),
    ("uint64", pa.uint64(), [2**64 - 1, 0, 2**63, None]),
    ("float", pa.float32(), [-1.5, F32_MAX, -F32_MAX, F32_MIN_SUB, math.nan, math.inf, -math.inf, -0.0, None]),
    ("double", pa.float64(), [-1.5, sys.float_info.max, 5e-324, math.nan, math.inf, -math.inf, -0.0, 0.1, None]),
    ("float16", pa.float16(), [1.5, -2.0, 65504.0, 2.0**-24, math.inf, -math.inf, math.nan, None]),
    ("string", pa.string(), ["", "héllo ☃", "a\x00b", "x" * 300, None]),
    ("large_string", pa.large_string(), ["ü", "", None]),
    ("binary", pa.binary(), [b"", b"\x00\xff\x80", b"\xfe" * 40, None]),
    ("fixed_binary", pa.binary(3), [b"\x00\x00\x00", b"\xff\xfe\xfd", b"abc", None]),
    ("dictionary", pa.dictionary(pa.int32(), pa.string()), ["a", "b", "a", None]),
    ("date", pa.date32(), [0, -1, 19723, -719162, 2932896, None]),
    ("time_ms", pa.time32("ms"), [0, 86399999, 1, None]),
    ("time_us", pa.time64("us"), [0, 86399999999, None]),
    ("time_ns", pa.time64("ns"), [0, 86399999999999, None]),
    ("ts_ms", pa.timestamp("ms"), [-1, 0, 1704067200123, -(2**63) + 1, 2**63 - 1, None]),
    ("ts_us_utc", pa.timestamp("us", tz="UTC"), [-1, 1704067200123456, 2**63 - 1, None]),
    ("ts_ns", pa.timestamp("ns"), [-1, 1704067200123456789, -(2**63) + 1, 2**63 - 1, None]),
    ("decimal_9_2", pa.decimal128(9, 2), dec(9, 2) + [None]),
    ("decimal_18_4", pa.decimal128(18, 4), dec(18, 4) + [None]),
    ("decimal_38_10", pa.decimal128(38, 10), dec(38, 10) + [None]),
    ("decimal_5_0", pa.decimal128(5, 0), dec(5, 0) + [None]),
    ("decimal256_76_20", pa.decimal256(76, 20), dec(76, 20) + [None]),
    ("uuid", pa.uuid(), [uuid.UUID(int=1).bytes, uuid.UUID("12345678-9abc-def0-8123-456789abcdef").bytes, None]),
    ("json", pa.json_(), ['{"a":[1,2]}', "null", None]),
    ("null", pa.null(), [None]),
]
ROWS = 13  # with row_group_size 4: 4 row groups


def column_array(typ, values):
    vals = [values[i % len(values)] for i in range(ROWS - 1)] + [None]
    if pa.types.is_dictionary(typ):
        return pa.array(vals, pa.string()).dictionary_encode()
    if isinstance(typ, pa.UuidType):
        return pa.ExtensionArray.from_storage(typ, pa.array(vals, pa.binary(16)))
    if isinstance(typ, pa.JsonType):
        return pa.ExtensionArray.from_storage(typ, pa.array(vals, pa.string()))
    return pa.array(vals, typ)


def full_table():
    return pa.table({name: column_array(typ, vals) for name, typ, vals in COLUMNS})


def write(path, table, **options):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), ".tmp-" + os.path.basename(path))
    pq.write_table(table, tmp, store_schema=False, **options)
    os.rename(tmp, path)


def expected(out, path, options):
    cols, rows = weirmap.read(path)
    md = pq.ParquetFile(path).metadata
    return {
        "file": os.path.relpath(path, out),
        "options": options,
        "row_groups": md.num_row_groups,
        "columns": cols,
        "rows": rows,
    }


def sink_input(out, expected_path):
    full = full_table()
    tables = []
    variants = [("SNAPPY", True, "1.0"), ("ZSTD", False, "2.0"), ("GZIP", True, "2.0"), ("NONE", False, "1.0")]
    for i, (codec, dictionary, page) in enumerate(variants):
        ids = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
        path = os.path.join(out, "2024-01-01T00:00:%02dZ.parquet" % i)
        write(path, full.add_column(0, "id", ids), compression=codec, use_dictionary=dictionary,
              data_page_version=page, row_group_size=5)
        cols, rows = weirmap.read(path)
        tables.append({"file": os.path.basename(path), "columns": cols, "rows": rows})
    with open(expected_path, "w") as f:
        json.dump({"pyarrow": pa.__version__, "tables": tables}, f, indent=1)


def matrix(out):
    tables, refused = [], []
    seq = 0

    def name(variant):
        nonlocal seq
        seq += 1
        return "2024-01-01T00:%02d:%02dZ_%s.parquet" % (seq // 60, seq % 60, variant)

    full = full_table()
    # The matrix: every codec x dictionary on/off x data page v1/v2, in
    # row groups of 4 rows and pages of at most 3 rows.
    for codec in ["NONE", "SNAPPY", "GZIP", "BROTLI", "LZ4", "ZSTD"]:
        for dictionary in [True, False]:
            for page in ["1.0", "2.0"]:
                options = {"compression": codec, "use_dictionary": dictionary, "data_page_version": page,
                           "row_group_size": 4, "max_rows_per_page": 3}
                variant = "%s-%s-v%s" % (codec.lower(), "dict" if dictionary else "plain", page[0])
                path = os.path.join(out, "read", name(variant))
                write(path, full, **options)
                tables.append(expected(out, path, options))

    # Decimals of precision <= 18 stored as INT32 / INT64.
    dec_cols = [c for c in full.column_names if c.startswith("decimal")] + ["int32"]
    options = {"store_decimal_as_integer": True, "row_group_size": 5}
    path = os.path.join(out, "read", name("decimal-as-integer"))
    write(path, full.select(dec_cols), **options)
    tables.append(expected(out, path, options))

    # INT96 timestamps (nanoseconds; pyarrow reads them back as ns).
    options = {"use_deprecated_int96_timestamps": True, "row_group_size": 5}
    path = os.path.join(out, "read", name("int96"))
    write(path, full.select(["ts_ns", "int32"]), **options)
    tables.append(expected(out, path, options))

    # Format version 1.0: no UINT_32 (uint32 is a plain INT64), and
    # annotation-less INT32/INT64 as in the rest.
    v1_cols = ["bool", "int8", "int32", "int64", "uint32", "uint64", "ts_ms", "string", "binary", "fixed_binary"]
    options = {"version": "1.0", "row_group_size": 6}
    path = os.path.join(out, "read", name("format-1.0"))
    write(path, full.select(v1_cols), **options)
    tables.append(expected(out, path, options))

    # Non-default encodings (no dictionary).
    enc = {"int32": "DELTA_BINARY_PACKED", "int64": "DELTA_BINARY_PACKED", "uint64": "DELTA_BINARY_PACKED",
           "float": "BYTE_STREAM_SPLIT", "double": "BYTE_STREAM_SPLIT", "fixed_binary": "BYTE_STREAM_SPLIT",
           "string": "DELTA_BYTE_ARRAY", "binary": "DELTA_LENGTH_BYTE_ARRAY", "bool": "RLE"}
    options = {"use_dictionary": False, "column_encoding": enc, "row_group_size": 4}
    path = os.path.join(out, "read", name("encodings"))
    write(path, full.select(list(enc)), **options)
    tables.append(expected(out, path, options))

    # Refused: nested columns, and an INT96 timestamp int64 nanoseconds
    # cannot hold.
    cases = [
        ("nested-list", "list", pa.array([[1, 2], None, []], pa.list_(pa.int64())), "a list"),
        ("nested-struct", "struct", pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}],
                                             pa.struct([("a", pa.int64()), ("b", pa.string())])), "a struct"),
        ("nested-map", "map", pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())), "a map"),
        ("int96-year-3000", "ts", pa.array([0, 32503680000], pa.timestamp("s")), "INT96 timestamp"),
    ]
    for case, column, arr, want in cases:
        t = pa.table({"id": pa.array(range(len(arr)), pa.int32()), column: arr})
        path = os.path.join(out, "refused", case, name(case))
        write(path, t, use_deprecated_int96_timestamps=case.startswith("int96"))
        refused.append({"case": case, "file": os.path.relpath(path, out), "column": column, "want": want})

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"pyarrow": pa.__version__, "tables": tables, "refused": refused}, f, indent=1)


if sys.argv[1:2] == ["matrix"] and len(sys.argv) == 3:
    matrix(sys.argv[2])
elif sys.argv[1:2] == ["sink-input"] and len(sys.argv) == 4:
    sink_input(sys.argv[2], sys.argv[3])
else:
    sys.exit(__doc__)
