package pebble

import (
	"encoding/binary"
	"fmt"

	"github.com/weir-stream/weir/store"
)

// Key layout
//
// Every store.Table is a key range of the one Pebble keyspace:
//
//	user row:  <table name> 0x00 <user key>
//	metadata:  0x00 "weir" 0x00 <name>
//
// A valid table name is non-empty and made of [a-z0-9_] only, so it never
// contains 0x00 or 0x01. Hence:
//
//   - the rows of table t are exactly the keys in [t 0x00, t 0x01): the
//     separator is the smallest byte, any user key (arbitrary bytes, 0x00
//     and 0xff included) sorts inside the range, and no other table's keys do
//     (for tables "a" and "ab", "a\x01" < "ab\x00" because 0x01 < 'b');
//   - Scan and DeleteRange with a nil bound map to the table's range bound, so
//     a scan or a range deletion can never cross into another table;
//   - metadata keys start with 0x00, a byte no table name can start with, so no
//     Scan, Get or DeleteRange of a table can read or delete them.
//
// Order inside a table is bytewise order of the user keys, the order
// store.Scan promises.
const (
	// tableSep ends the table name in a row key.
	tableSep = 0x00
	// tableEnd is the first byte after tableSep: t+tableEnd bounds table t.
	tableEnd = 0x01
)

// Metadata keys. They are written only by this package.
var (
	// metaFormat holds the layout version (layoutVersion, 8 bytes big-endian).
	// Open refuses a directory with another version rather than misreading it.
	metaFormat = []byte("\x00weir\x00format")
	// metaIncarnation holds the highest lease-id block ever reserved (8 bytes
	// big-endian). Lease ids are (block << 32) | counter; see leases.go.
	metaIncarnation = []byte("\x00weir\x00incarnation")
	// metaTimestampCeiling holds a unix second (8 bytes big-endian) such that
	// every Timestamp ever issued is below ceiling << 30; see timestamp.go.
	metaTimestampCeiling = []byte("\x00weir\x00timestamp_ceiling")
)

// layoutVersion is the version of the key layout documented above.
const layoutVersion = 1

// rowKey returns the Pebble key of key in table.
func rowKey(table store.Table, key []byte) []byte {
	return appendRowKey(make([]byte, 0, len(table)+1+len(key)), table, key)
}

// appendRowKey appends rowKey(table, key) to dst.
func appendRowKey(dst []byte, table store.Table, key []byte) []byte {
	dst = append(dst, table...)
	dst = append(dst, tableSep)
	return append(dst, key...)
}

// tableBounds returns the Pebble range [lo, hi) for the user-key range
// [userLo, userHi) of table. A nil userLo means the start of the table, a nil
// userHi its end.
func tableBounds(table store.Table, userLo, userHi []byte) (lo, hi []byte) {
	lo = rowKey(table, userLo)
	if userHi == nil {
		hi = make([]byte, 0, len(table)+1)
		hi = append(hi, table...)
		hi = append(hi, tableEnd)
	} else {
		hi = rowKey(table, userHi)
	}
	return lo, hi
}

// userKey strips the table prefix of a row key of table.
func userKey(table store.Table, k []byte) []byte { return k[len(table)+1:] }

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(name string, b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("pebble store: metadata %s: %d bytes, want 8", name, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}
