package statictable

import (
	"errors"
	"fmt"
	_ "unsafe" // go:linkname

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/format"
	plz4 "github.com/pierrec/lz4/v4"
)

// parquet-go (v0.32.0) decodes LZ4_RAW pages wrongly when a page
// compresses less than 3:1 and its page buffer (sized for the
// uncompressed page, or reused from a pool with any capacity) is smaller
// than 3 × the compressed size: its codec then decodes into a new buffer,
// which the reader drops when the length is the expected one, and the page
// reads as the stale bytes of the pooled buffer — an error at best (every
// LZ4 table DuckDB writes), another page's values at worst. Its codec also
// retries forever, doubling its buffer, on corrupt input.
//
// lz4RawCodec fixes both: it decodes into the caller's buffer when that
// holds the page, and gives up with an error once the buffer exceeds what
// LZ4 can expand the input to. init installs it in parquet-go's codec table
// (reached with go:linkname: parquet-go offers no way to register a codec)
// after checking that the table is the one this was written against;
// lz4Fixed says whether it is installed — if not, checkLZ4Pages refuses the
// pages parquet-go may decode wrongly.
type lz4RawCodec struct{ lz4.Codec }

//go:linkname parquetCodecs github.com/parquet-go/parquet-go.compressionCodecs
var parquetCodecs [format.Lz4Raw + 1]compress.Codec

var lz4Fixed = installLZ4()

func installLZ4() bool {
	if parquetCodecs[format.Lz4Raw] != compress.Codec(&pq.Lz4Raw) || parquetCodecs[format.Zstd] != compress.Codec(&pq.Zstd) ||
		parquetCodecs[format.Uncompressed] != compress.Codec(&pq.Uncompressed) {
		return false
	}
	parquetCodecs[format.Lz4Raw] = &lz4RawCodec{pq.Lz4Raw}
	return pq.LookupCompressionCodec(format.Lz4Raw) == parquetCodecs[format.Lz4Raw]
}

// lz4MaxRatio bounds what an LZ4 block can expand to (a match of 255+
// bytes costs at least one input byte per 255 output bytes).
const lz4MaxRatio = 255

// Decode decompresses the LZ4 block src into dst's array when it fits
// (parquet-go sizes dst for the uncompressed page and keeps using it),
// else into a larger buffer.
func (c *lz4RawCodec) Decode(dst, src []byte) ([]byte, error) {
	buf := dst[:cap(dst)]
	limit := lz4MaxRatio*len(src) + 64
	for {
		n, err := plz4.UncompressBlock(src, buf)
		if err == nil {
			return buf[:n], nil
		}
		if len(buf) >= limit {
			return nil, fmt.Errorf("LZ4_RAW page of %d bytes: %w", len(src), errors.Join(errMalformed, err))
		}
		buf = make([]byte, min(limit, max(2*len(buf), 3*len(src), 64)))
	}
}
