package kafka

import (
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSinkCompression: the compression parameter decides the codec of the
// record batches on the wire (read from the produce requests the broker
// receives; franz-go leaves a batch that does not shrink uncompressed),
// the default is none, every codec reads back, and an unknown
// codec is refused naming the parameter.
func TestSinkCompression(t *testing.T) {
	codecs := map[string]int16{"": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	for name, want := range codecs {
		t.Run("codec="+name, func(t *testing.T) {
			c := newCluster(t, map[string]int32{"out": 1})
			var mu sync.Mutex
			seen := map[int16]int{}
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				for _, tp := range r.(*kmsg.ProduceRequest).Topics {
					for _, p := range tp.Partitions {
						if len(p.Records) >= 23 {
							mu.Lock()
							seen[int16(binary.BigEndian.Uint16(p.Records[21:23]))&0x7]++
							mu.Unlock()
						}
					}
				}
				return nil, nil, false
			})
			extra := map[string]any{}
			if name != "" {
				extra["compression"] = name
			}
			h := newSinkHarness(t)
			s := newTestSink(t, sinkParams(c, extra))
			h.init(s)
			msgs := messages(20, "k", 0, 20)
			if err := h.epoch(s, msgs...); err != nil {
				t.Fatal(err)
			}
			if err := h.drain(s, idsOf(msgs)); err != nil {
				t.Fatal(err)
			}
			checkOnce(t, payloadNs(t, readCommitted(t, c, "out")), 20)
			mu.Lock()
			defer mu.Unlock()
			// franz-go sends a batch uncompressed when compressing does not
			// make it smaller (a batch of one small record, which a loaded
			// machine's timing can cut): codec 0 may appear beside the
			// chosen one, never another codec.
			for codec := range seen {
				if codec != want && codec != 0 {
					t.Fatalf("batch codecs on the wire %v, want only %d (and 0)", seen, want)
				}
			}
			if seen[want] == 0 {
				t.Fatalf("batch codecs on the wire %v: none with codec %d", seen, want)
			}
		})
	}
	c := newCluster(t, map[string]int32{"out": 1})
	if _, err := NewSink(sinkParams(c, map[string]any{"compression": "brotli"}), testOptions(t.Logf)); err == nil ||
		!strings.Contains(err.Error(), `computations.Counter.sinks.out.parameters.compression: "brotli" is not a codec`) {
		t.Fatalf("compression = brotli: %v", err)
	}
}
