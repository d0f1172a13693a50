package clickhouse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
)

// router assigns a sharded sink's rows to shards by rendezvous hashing: a
// row goes to the shard with the highest hash of (shard name, key), where
// the key is the sharding_key_columns' values (encoded by codec.AppendKey)
// or, without them, the message id. Adding or removing a shard moves only
// the rows that the changed shard wins or loses.
type router struct {
	names   []string // sorted
	keyCols []string
}

// shardOf returns the index (into names) of m's shard.
func (r *router) shardOf(m *weir.Message) (int, error) {
	var key []byte
	if len(r.keyCols) == 0 {
		key = []byte(m.ID)
	} else {
		vals := make([]any, len(r.keyCols))
		for i, c := range r.keyCols {
			vals[i] = m.Payload[c]
		}
		var err error
		if key, err = codec.AppendKey(nil, vals...); err != nil {
			return 0, permanent("message %s: sharding_key_columns %v: %v", m.ID, r.keyCols, err)
		}
	}
	best, bestScore := 0, uint64(0)
	buf := make([]byte, 0, 64)
	for i, n := range r.names {
		buf = append(append(append(buf[:0], n...), 0), key...)
		if s := codec.Hash64(buf); i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best, nil
}

// fingerprint identifies the routing: the shard names and the sharding
// key. Batches planned under one fingerprint are split by it; a sink whose
// state holds undelivered batches of another fingerprint refuses to start
// (replaying them with another split would change every shard's rows under
// the same tokens).
func (r *router) fingerprint() string {
	h := sha256.Sum256([]byte(fmt.Sprintf("shards=%s;key=%s", strings.Join(r.names, ","), strings.Join(r.keyCols, ","))))
	return "v1:" + hex.EncodeToString(h[:8])
}

func (r *router) describe() string {
	key := "message id"
	if len(r.keyCols) > 0 {
		key = strings.Join(r.keyCols, ",")
	}
	return fmt.Sprintf("shards [%s], sharding key %s", strings.Join(r.names, ", "), key)
}
