package clickhouse

import (
	"strconv"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// BenchmarkEncodeRows: encoding cost of a 10000-row batch (key String,
// count Int64, msg_id String) in each format.
func BenchmarkEncodeRows(b *testing.B) {
	msgs := make([]*weir.Message, 10000)
	for i := range msgs {
		msgs[i] = &weir.Message{ID: msgid.Ordered(7, "counts", uint64(i)), Payload: weir.Row{"key": "key-" + strconv.Itoa(i%1000), "count": int64(i)}}
	}
	b.Run("hand-written", func(b *testing.B) {
		var body []byte
		for b.Loop() {
			body = body[:0]
			for _, m := range msgs {
				body = append(body, m.Payload["key"].(string)...)
				body = append(body, '\t')
				body = strconv.AppendInt(body, m.Payload["count"].(int64), 10)
				body = append(body, '\t')
				body = append(body, m.ID...)
				body = append(body, '\n')
			}
		}
	})
	for _, f := range []string{FormatTabSeparated, FormatJSONEachRow} {
		b.Run(f, func(b *testing.B) {
			e := newRowEncoder(f, []column{{name: "key", typ: &colType{kind: kindString}}, {name: "count", typ: &colType{kind: kindInt, bits: 64}}, {name: "msg_id", typ: &colType{kind: kindString}, messageID: true}})
			for b.Loop() {
				if _, err := encodeRows(e, msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
