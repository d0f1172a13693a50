package codec_test

import (
	"bytes"
	"fmt"

	"github.com/weir-stream/weir/internal/codec"
)

func ExampleAppendRow() {
	row := map[string]any{"key": "user-123", "count": 42, "ts": uint64(1700000000)}
	buf, err := codec.AppendRow(nil, row)
	if err != nil {
		panic(err)
	}
	got, rest, err := codec.DecodeRow(buf)
	fmt.Printf("%d bytes, %T %v, %q, %d left, %v\n", len(buf), got["count"], got["count"], got["key"], len(rest), err)
	// Output: 34 bytes, int64 42, "user-123", 0 left, <nil>
}

func ExampleAppendKey() {
	a, _ := codec.AppendKey(nil, "user-1", int64(-5))
	b, _ := codec.AppendKey(nil, "user-1", int64(3))
	prefix, _ := codec.AppendKey(nil, "user-1")
	fmt.Println(bytes.Compare(a, b), bytes.HasPrefix(b, prefix))
	// Output: -1 true
}
