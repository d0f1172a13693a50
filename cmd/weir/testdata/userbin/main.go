// Command userbin is a user's own weir binary, built as README's "Your own
// computations" says, with classes whose code fails: the end-to-end tests
// of user-code failures (lifecycle_test.go) run it. It lives under testdata
// so that 'go build ./...' and 'go vet ./...' leave it out.
//
//	Explode: a Transform copying each row to its first output stream, that
//	         panics on a row with "poison": true — unless the environment
//	         sets WEIR_TEST_DEFUSE=1 (the fixed code), then it skips the row.
//	Stray:   a Transform emitting on a stream it does not declare, and
//	         dropping the error Add returns.
//	Refuse:  a Transform returning an error for a row with "poison": true.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/cli"
	"github.com/weir-stream/weir/engine"
)

func main() {
	classes := engine.DefaultClasses()
	classes.MustRegister("Explode", weir.Transform(explode))
	classes.MustRegister("Stray", weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		_ = out.Add("undeclared", m.Payload)
		return nil
	}))
	classes.MustRegister("Refuse", weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		if m.Payload["poison"] == true {
			return errors.New("Refuse: this row is poison")
		}
		return out.Add(out.Streams()[0], m.Payload)
	}))
	os.Exit(cli.Main(os.Args[1:], cli.Options{Classes: classes}))
}

func explode(_ weir.Context, m *weir.Message, out weir.Output) error {
	if m.Payload["poison"] == true {
		if os.Getenv("WEIR_TEST_DEFUSE") == "1" {
			return nil
		}
		panic(fmt.Sprintf("poison row %v", m.Payload["key"]))
	}
	return out.Add(out.Streams()[0], m.Payload)
}
