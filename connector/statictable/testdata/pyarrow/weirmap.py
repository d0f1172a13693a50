"""The weir values of Parquet values, as pyarrow reads them.

Shared by the scripts of this directory. A value is encoded as the weir
value StaticTableSource must produce for it, by the mapping documented in
connector/statictable/doc.go ("Parquet values"), computed here from the
column's annotations as pyarrow sees them and the value as pyarrow reads
it (an oracle independent of weir's reader):

    ["bool", b], ["int64", "n"], ["uint64", "n"], ["float64", "repr"],
    ["string", s], ["bytes", "hex"], or null.
"""

import math
import uuid

import pyarrow as pa
import pyarrow.parquet as pq


def annotation(col):
    lt = col.logical_type
    return None if lt is None or lt.type == "NONE" else str(lt)


def describe(path):
    """The schema pyarrow sees in the file, one entry per leaf column."""
    f = pq.ParquetFile(path)
    out = []
    for i in range(len(f.schema)):
        col = f.schema.column(i)
        out.append({
            "name": col.name,
            "physical": col.physical_type,
            "length": col.length or 0,
            "logical": annotation(col),
            "converted": col.converted_type if col.converted_type != "NONE" else None,
        })
    return out


def weir_value(col, v):
    """The weir value of v, a value of column col (a describe entry)."""
    if v is None:
        return None
    phys, logical = col["physical"], col["logical"] or ""
    if logical.startswith("Null"):
        return None
    if phys == "BOOLEAN":
        return ["bool", v]
    if logical.startswith("Decimal"):
        return ["string", format(v, "f")]
    if phys in ("INT32", "INT64", "INT96"):
        if "isSigned=false" in logical:
            return ["uint64", str(v)]
        return ["int64", str(v)]
    if phys in ("FLOAT", "DOUBLE") or logical.startswith("Float16"):
        return ["float64", "nan" if math.isnan(v) else repr(float(v))]
    if logical.startswith(("String", "JSON", "Enum")):
        # pyarrow reads ENUM as binary
        return ["string", v.decode() if isinstance(v, bytes) else v]
    if logical.startswith("UUID"):
        return ["string", str(uuid.UUID(bytes=v))]
    return ["bytes", v.hex()]


def as_python(arr):
    """The values of arr as Python values: temporal ones as the integers
    the file stores, float16 widened, extension types as their storage."""
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        arr, t = arr.storage, arr.storage.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        arr = arr.cast(pa.int32())
    elif pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_date64(t):
        arr = arr.cast(pa.int64())
    elif pa.types.is_float16(t):
        arr = arr.cast(pa.float32())
    return arr.to_pylist()


def read(path):
    """The file's schema (describe) and its rows, each a dict of weir
    values by column name, in file order."""
    cols = describe(path)
    table = pq.read_table(path)
    columns = {}
    for col in cols:
        vals = as_python(table.column(col["name"]).combine_chunks())
        columns[col["name"]] = [weir_value(col, v) for v in vals]
    rows = [{c["name"]: columns[c["name"]][i] for c in cols} for i in range(table.num_rows)]
    return cols, rows
