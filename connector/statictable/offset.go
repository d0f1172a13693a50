package statictable

import "github.com/weir-stream/weir/connector"

// Source offsets are read positions "row r of table g": the table's
// catalog ordinal in the high ordinalBits bits, the row index in the low
// rowBits. They increase in read order (tables by ordinal, rows by index),
// and are stable across runs because ordinals never change (see catalog).
// A partition reads only its own ordinals, so its offsets have gaps, which
// connector.Batch allows.
//
// This is the general shape of a read-range source — an ordered list of
// segments, each an ordered list of rows, positions committed with the
// epoch — so a later source over another segmented input (the service
// log's cycles over a sorted table) can reuse position and its packing.
const (
	rowBits     = 40
	ordinalBits = 64 - rowBits
	// maxRows is the most rows a table may have.
	maxRows = 1 << rowBits
	// maxOrdinals is the most tables a catalog may hold.
	maxOrdinals = 1 << ordinalBits
)

// position is a read position: row Row of the table with ordinal Ordinal.
type position struct {
	Ordinal uint32
	Row     int64
}

func (p position) offset() connector.Offset {
	return connector.Offset(uint64(p.Ordinal)<<rowBits | uint64(p.Row))
}

func positionOf(o connector.Offset) position {
	return position{Ordinal: uint32(uint64(o) >> rowBits), Row: int64(uint64(o) & (maxRows - 1))}
}
