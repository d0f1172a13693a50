// Package builtin holds the computation classes weir ships for examples,
// demos and tests: Counter (a keyed Transform), ExternalCounter (Counter
// over an external state table), Digest (over a service log), Tokenize (a
// SwiftMap) and the passthroughs. Each emits on its computation's first
// output stream.
package builtin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weir-stream/weir"
)

// Register adds the built-in classes to r: Counter, ExternalCounter,
// Digest, Tokenize, Passthrough (Transform) and SwiftPassthrough
// (SwiftMap).
func Register(r *weir.Registry) error {
	return errors.Join(
		r.Register("Counter", Counter()),
		r.Register("Tokenize", Tokenize()),
		r.Register("Passthrough", Passthrough(weir.KindTransform)),
		r.Register("SwiftPassthrough", Passthrough(weir.KindSwiftMap)),
		r.Register("ExternalCounter", ExternalCounter()),
		r.Register("Digest", Digest()),
	)
}

// counts is Counter's per-key state.
var counts = weir.NewState[int64]("count")

func firstStream(out weir.Output) (string, error) {
	s := out.Streams()
	if len(s) == 0 {
		return "", errors.New("the computation has no output stream (output_stream_ids is empty)")
	}
	return s[0], nil
}

// Counter is a keyed Transform (group it by column "key"): it keeps a per-key count
// and, for every input row, emits {"key": <key>, "count": <count after this
// message>}. It is the exactly-once oracle: each key's emitted counts must be
// exactly 1..n, once each.
func Counter() weir.Computation {
	c := weir.Transform(func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
		stream, err := firstStream(out)
		if err != nil {
			return fmt.Errorf("Counter: %w", err)
		}
		n, err := counts.Get(ctx)
		if err != nil {
			return err
		}
		n++
		counts.Set(ctx, n)
		return out.Add(stream, weir.Row{"key": msg.Payload["key"], "count": n})
	})
	c.Keyed = true // per-key counts: a spec without group_by is refused
	return c
}

// Tokenize is a SwiftMap: for an input row {"text": "..."} it emits one row
// {"key": <word>} per whitespace-separated word, in order. A row without a
// string "text" column is an error naming the message.
func Tokenize() weir.Computation {
	return weir.SwiftMap(func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
		stream, err := firstStream(out)
		if err != nil {
			return fmt.Errorf("Tokenize: %w", err)
		}
		text, ok := msg.Payload["text"].(string)
		if !ok {
			return fmt.Errorf("Tokenize: message %s has no string column \"text\"", msg.ID)
		}
		for _, w := range strings.Fields(text) {
			if err := out.Add(stream, weir.Row{"key": w}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Passthrough emits every input row unchanged; as a Transform it
// materializes (fresh ids), as a SwiftMap it inherits ids.
func Passthrough(kind weir.Kind) weir.Computation {
	fn := func(ctx weir.Context, msg *weir.Message, out weir.Output) error {
		stream, err := firstStream(out)
		if err != nil {
			return fmt.Errorf("Passthrough: %w", err)
		}
		return out.Add(stream, msg.Payload)
	}
	return weir.Computation{Kind: kind, OnMessage: fn}
}
