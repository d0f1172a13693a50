package statictable

import (
	"errors"
	"fmt"
	_ "unsafe" // go:linkname

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/format"
	plz4 "github.com/pierrec/lz4/v4"
)

// Fixes of parquet-go (v0.32.0) decoding bugs, installed in its codec and
// encoding tables at init.
//
// parquet-go decodes LZ4_RAW pages wrongly when a page
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

// deltaBinaryPacked is parquet-go's DELTA_BINARY_PACKED decoding with INT32
// pages decoded in 64-bit arithmetic and then truncated. The format defines
// INT32 deltas modulo 2^32, but writers compute them in 64 bits (DuckDB's
// format V2 writes deltas up to 33 bits wide, and first values above
// 2^31 for UINT_32 columns); parquet-go's 32-bit decoder reads those
// wrongly or refuses them. The low 32 bits of the 64-bit sums are the
// values either way. init installs it as lz4RawCodec is installed;
// deltaFixed says whether it is — if not, openParquet refuses INT32
// columns in that encoding.
type deltaBinaryPacked struct{ delta.BinaryPackedEncoding }

//go:linkname parquetEncodings github.com/parquet-go/parquet-go.encodings
var parquetEncodings [format.ByteStreamSplit + 1]encoding.Encoding

var deltaFixed = installDelta()

func installDelta() bool {
	if parquetEncodings[format.DeltaBinaryPacked] != encoding.Encoding(&pq.DeltaBinaryPacked) ||
		parquetEncodings[format.Plain] != encoding.Encoding(&pq.Plain) || parquetEncodings[format.ByteStreamSplit] != encoding.Encoding(&pq.ByteStreamSplit) {
		return false
	}
	parquetEncodings[format.DeltaBinaryPacked] = &deltaBinaryPacked{}
	return pq.LookupEncoding(format.DeltaBinaryPacked) == parquetEncodings[format.DeltaBinaryPacked]
}

// DecodeInt32 decodes src as 64-bit values and keeps their low 32 bits.
func (e *deltaBinaryPacked) DecodeInt32(dst []int32, src []byte) ([]int32, error) {
	wide, err := e.BinaryPackedEncoding.DecodeInt64(make([]int64, 0, max(cap(dst), 64)), src)
	if err != nil {
		return dst[:0], err
	}
	dst = dst[:0]
	for _, v := range wide {
		dst = append(dst, int32(v))
	}
	return dst, nil
}
