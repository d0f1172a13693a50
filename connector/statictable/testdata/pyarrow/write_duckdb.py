"""Writes Parquet tables with DuckDB, the second foreign writer of the
StaticTableSource tests (pyarrow is the first).

Usage: write_duckdb.py OUT

Writes OUT/read/<time>_duckdb_<codec>_<version>.parquet: one table of
every type DuckDB writes to Parquet — signed and unsigned integers of
every width, BOOLEAN, FLOAT, DOUBLE, HUGEINT (DuckDB writes DOUBLE),
DECIMAL on INT32, INT64 and FIXED_LEN_BYTE_ARRAY, VARCHAR, BLOB, ENUM,
JSON, UUID, DATE, TIME, TIMESTAMP in ms, us and ns, TIMESTAMPTZ and
INTERVAL — with negative values, extremes, NaN/±Inf/-0, a null in every
column and a last row of nulls, then generated rows so that there are
several row groups; once per codec DuckDB offers in format V1 (PLAIN and
dictionary encodings), and with ZSTD in format V2 (the DELTA encodings
too), without the INTEGER and UINTEGER columns (see V2_LEFT_OUT; DuckDB
writes data pages v1 for both); and
OUT/read/<time>_duckdb_int32_V2.parquet, those two columns in format V2,
read back by DuckDB.

And OUT/expected.json: the DuckDB version and, per table, its file, the
options (with the encodings of its column chunks), its row group count,
the schema pyarrow sees in the file and its rows as pyarrow reads them
back (DuckDB for the INT32 table), each value encoded as the weir value
the documented mapping gives (weirmap.py) — pyarrow is the oracle, DuckDB
the writer. DuckDB cannot write an integer column without an annotation (it
always writes INT(n, signed)); those legacy forms come from pyarrow and
parquet-go. The output is the same on every run.
"""

import json
import os
import sys

import duckdb
import pyarrow.parquet as pq

import weirmap

# Each column: name, DuckDB type, and the SQL values of the explicit rows
# (six rows: extremes, the other extremes, small and special values, a
# null in each column somewhere, then a row of nulls).
COLUMNS = [
    ("b", "BOOLEAN", ["true", "false", "NULL", "true", "false"]),
    ("i8", "TINYINT", ["-128", "127", "-1", "0", "NULL"]),
    ("i16", "SMALLINT", ["-32768", "32767", "-1", "NULL", "0"]),
    ("i32", "INTEGER", ["-2147483648", "2147483647", "-1", "-2", "NULL"]),
    ("i64", "BIGINT", ["-9223372036854775808", "9223372036854775807", "-1", "NULL", "0"]),
    ("u8", "UTINYINT", ["0", "255", "128", "NULL", "1"]),
    ("u16", "USMALLINT", ["0", "65535", "32768", "1", "NULL"]),
    ("u32", "UINTEGER", ["0", "4294967295", "2147483648", "NULL", "1"]),
    ("u64", "UBIGINT", ["0", "18446744073709551615", "9223372036854775808", "1", "NULL"]),
    ("f", "FLOAT", ["'-inf'", "'inf'", "'nan'", "'-0.0'", "NULL"]),
    ("d", "DOUBLE", ["-1.7976931348623157e308", "5e-324", "'nan'", "NULL", "'-0.0'"]),
    ("huge", "HUGEINT", ["-170141183460469231731687303715884105727", "170141183460469231731687303715884105727", "-1", "NULL", "0"]),
    ("dec4", "DECIMAL(4,1)", ["-999.9", "999.9", "-0.1", "NULL", "0"]),
    ("dec9", "DECIMAL(9,2)", ["-9999999.99", "9999999.99", "-1.50", "0", "NULL"]),
    ("dec18", "DECIMAL(18,3)", ["-999999999999999.999", "999999999999999.999", "-0.001", "NULL", "0"]),
    ("dec38", "DECIMAL(38,10)", ["-9999999999999999999999999999.9999999999", "9999999999999999999999999999.9999999999", "-1.5", "0", "NULL"]),
    ("s", "VARCHAR", ["''", "'héllo ☃'", "repeat('x', 300)", "NULL", "'a'"]),
    ("bl", "BLOB", ["''::BLOB", "'\\x00\\xFF\\x80'::BLOB", "NULL", "'abc'::BLOB", "'\\xFE'::BLOB"]),
    ("en", "ENUM('RED', 'GREEN', 'BLUE')", ["'RED'", "'BLUE'", "NULL", "'GREEN'", "'RED'"]),
    ("js", "JSON", ["'{\"a\":1}'", "'[]'", "NULL", "'\"x\"'", "'1'"]),
    ("uu", "UUID", ["'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "'00112233-4455-6677-8899-aabbccddeeff'", "NULL", "'80000000-0000-0000-0000-000000000001'"]),
    ("dt", "DATE", ["DATE '1677-09-22'", "DATE '2262-04-11'", "DATE '1969-12-31'", "NULL", "DATE '1970-01-01'"]),
    ("tm", "TIME", ["TIME '00:00:00'", "TIME '23:59:59.999999'", "NULL", "TIME '12:00:00.5'", "TIME '00:00:00.000001'"]),
    ("ts", "TIMESTAMP", ["TIMESTAMP '1677-09-22 00:00:00'", "TIMESTAMP '2262-04-11 00:00:00'", "TIMESTAMP '1969-12-31 23:59:59.999999'", "NULL", "TIMESTAMP '1970-01-01 00:00:00'"]),
    ("ts_ms", "TIMESTAMP_MS", ["TIMESTAMP_MS '1900-01-01 00:00:00'", "TIMESTAMP_MS '2200-01-01 00:00:00.123'", "TIMESTAMP_MS '1969-12-31 23:59:59.999'", "NULL", "TIMESTAMP_MS '2024-01-01 00:00:00'"]),
    ("ts_ns", "TIMESTAMP_NS", ["TIMESTAMP_NS '1677-09-22 00:00:00'", "TIMESTAMP_NS '2262-04-11 00:00:00.123456789'", "TIMESTAMP_NS '1969-12-31 23:59:59.999999999'", "NULL", "TIMESTAMP_NS '2024-01-01 00:00:00'"]),
    ("ts_tz", "TIMESTAMPTZ", ["TIMESTAMPTZ '1900-01-01 00:00:00+00'", "TIMESTAMPTZ '2200-01-01 00:00:00+00'", "TIMESTAMPTZ '1969-12-31 23:59:59.999999+00'", "NULL", "TIMESTAMPTZ '2024-01-01 12:00:00+02'"]),
    ("iv", "INTERVAL", ["INTERVAL 1 DAY", "INTERVAL 14 MONTH", "NULL", "INTERVAL 1500 MILLISECOND", "INTERVAL 0 SECOND"]),
]

# Generated rows after the explicit ones: two row groups (DuckDB rounds
# ROW_GROUP_SIZE up to a multiple of its vector size, 2048).
GENERATED, GROUP = 2100, 2048

# Each column's value of generated row i (a BIGINT), cycling through
# negative and positive values.
GENERATED_SQL = {
    "b": "i % 3 = 0",
    "i8": "(i % 256 - 128)::TINYINT",
    "i16": "(i * 37 % 65536 - 32768)::SMALLINT",
    "i32": "(-i * 858993 % 2147483648)::INTEGER",
    "i64": "-i * 3689348814741910",
    "u8": "(i % 256)::UTINYINT",
    "u16": "(i * 41 % 65536)::USMALLINT",
    "u32": "(i * 1717987 % 4294967296)::UINTEGER",
    "u64": "(i::UHUGEINT * 7378697629483820 % 18446744073709551616)::UBIGINT",
    "f": "(i - 1250)::FLOAT / 8",
    "d": "(1250 - i)::DOUBLE / 3",
    "huge": "(-i)::HUGEINT * 1000000000000",
    "dec4": "((i * 7 % 19999) - 9999)::DECIMAL(5,0) / 10",
    "dec9": "(-i * 3.07)::DECIMAL(9,2)",
    "dec18": "(i * -1234567.891)::DECIMAL(18,3)",
    "dec38": "('-' || i || '123456789012345678.0123456789')::DECIMAL(38,10)",
    "s": "'row ' || i",
    "bl": "('\\x' || lpad(to_hex(i % 256), 2, '0'))::BLOB",
    "en": "(['RED', 'GREEN', 'BLUE'])[i % 3 + 1]",
    "js": "'{\"i\":' || i || '}'",
    "uu": "('00000000-0000-0000-0000-' || lpad(to_hex(i), 12, '0'))::UUID",
    "dt": "DATE '1970-01-01' + (i - 1250)::INTEGER",
    "tm": "TIME '00:00:00' + to_microseconds(i * 1000003)",
    "ts": "TIMESTAMP '1970-01-01' + to_microseconds((i - 1250) * 86400000123)",
    "ts_ms": "(TIMESTAMP '1970-01-01' + to_milliseconds((i - 1250) * 3600001))::TIMESTAMP_MS",
    "ts_ns": "(TIMESTAMP '1970-01-01' + to_microseconds((i - 1250) * 1000001))::TIMESTAMP_NS",
    "ts_tz": "(TIMESTAMP '1970-01-01' + to_microseconds((i - 1250) * 60000001))::TIMESTAMPTZ",
    "iv": "to_days(i::INTEGER % 40) + to_months(i::INTEGER % 13)",
}

# Codecs DuckDB writes (lz4 is LZ4_RAW) and its Parquet format versions.
CODECS = ["uncompressed", "snappy", "gzip", "zstd", "brotli", "lz4"]
VERSIONS = ["V1", "V2"]

# Columns the V2 tables hold apart: DuckDB writes their DELTA_BINARY_PACKED
# deltas in 64-bit arithmetic, up to 33 bits wide for INT32 (the extremes
# of a column are 2^32 - 1 apart), which pyarrow refuses ("delta bit width
# larger than integer bit width") and parquet-go's own decoder read
# wrongly (UINTEGER 0, 4294967295, 2147483648 as 0, 0, 2147483649). They
# go into a table of their own, whose rows DuckDB reads back as the oracle.
V2_LEFT_OUT = {"i32", "u32"}


def source_sql(columns):
    names = [c[0] for c in columns]
    rows = []
    for r in range(len(columns[0][2])):
        rows.append("(" + ", ".join(f"({c[2][r]})::{c[1]}" for c in columns) + ")")
    rows.append("(" + ", ".join(f"NULL::{c[1]}" for c in columns) + ")")
    explicit = f"SELECT * FROM (VALUES {', '.join(rows)}) AS t({', '.join(names)})"
    generated = "SELECT " + ", ".join(f"({GENERATED_SQL[c[0]]})::{c[1]} AS {c[0]}" for c in columns) + f" FROM range(1, {GENERATED + 1}) AS g(i)"
    # One ordered stream: explicit rows first (k 0), then the generated.
    return f"SELECT {', '.join(names)} FROM (SELECT 0 AS k, row_number() OVER () AS n, * FROM ({explicit}) UNION ALL SELECT 1, row_number() OVER (), * FROM ({generated})) ORDER BY k, n"


def main(out):
    con = duckdb.connect()
    con.execute("SET threads = 1")  # one writer thread: row groups in order
    read = os.path.join(out, "read")
    os.makedirs(read, exist_ok=True)
    tables = []
    hour = 0
    for version in VERSIONS:
        sql = source_sql([c for c in COLUMNS if version == "V1" or c[0] not in V2_LEFT_OUT])
        # Codecs are independent of the format version: V2 with one.
        for codec in CODECS if version == "V1" else ["zstd"]:
            name = f"2024-03-01T{hour:02d}:00:00Z_duckdb_{codec}_{version}.parquet"
            hour += 1
            path = os.path.join(read, name)
            tmp = os.path.join(read, ".tmp-" + name)
            con.execute(f"COPY ({sql}) TO '{tmp}' (FORMAT parquet, COMPRESSION {codec}, ROW_GROUP_SIZE {GROUP}, PARQUET_VERSION {version})")
            os.rename(tmp, path)
            cols, rows = weirmap.read(path)
            md = pq.ParquetFile(path).metadata
            encodings = sorted({e for g in range(md.num_row_groups) for c in range(md.num_columns) for e in md.row_group(g).column(c).encodings})
            tables.append({
                "file": os.path.relpath(path, out),
                "options": {"compression": codec, "parquet_version": version, "encodings": encodings},
                "row_groups": pq.ParquetFile(path).metadata.num_row_groups,
                "columns": cols,
                "rows": rows,
            })
    # The INTEGER and UINTEGER columns in format V2: DuckDB is the oracle.
    apart = [c for c in COLUMNS if c[0] in V2_LEFT_OUT]
    name = f"2024-03-01T{hour:02d}:00:00Z_duckdb_int32_V2.parquet"
    path = os.path.join(read, name)
    tmp = os.path.join(read, ".tmp-" + name)
    con.execute(f"COPY ({source_sql(apart)}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {GROUP}, PARQUET_VERSION V2)")
    os.rename(tmp, path)
    cols = weirmap.describe(path)
    names = ", ".join(c["name"] for c in cols)
    rows = [{c["name"]: weirmap.weir_value(c, v) for c, v in zip(cols, r)} for r in con.execute(f"SELECT {names} FROM '{path}'").fetchall()]
    tables.append({
        "file": os.path.relpath(path, out),
        "options": {"compression": "zstd", "parquet_version": "V2", "oracle": "duckdb"},
        "row_groups": pq.ParquetFile(path).metadata.num_row_groups,
        "columns": cols,
        "rows": rows,
    })
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"duckdb": duckdb.__version__, "tables": tables}, f)


if len(sys.argv) != 2:
    sys.exit(__doc__)
main(sys.argv[1])
