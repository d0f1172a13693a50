package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// skipRequest is the body of POST /pipeline/skip and what 'weir pipeline
// skip' records: one message of a computation, named by its id (a message
// of an internal stream) or by its source partition and offset (a source
// record, whose id changes at every retry).
type skipRequest struct {
	Computation     string `json:"computation"`
	Message         string `json:"message,omitempty"`
	SourcePartition string `json:"source_partition,omitempty"`
	Offset          *int64 `json:"offset,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// identity checks r and returns the skip record's identity.
func (r skipRequest) identity() (string, error) {
	switch {
	case r.Computation == "":
		return "", fmt.Errorf("need the computation (--computation NAME)")
	case r.Message != "" && (r.SourcePartition != "" || r.Offset != nil):
		return "", fmt.Errorf("name the message either by --message ID or by --source-partition and --offset, not both")
	case r.Message != "":
		return tables.MessageIdentity(msgid.ID(r.Message)), nil
	case r.SourcePartition == "" || r.Offset == nil:
		return "", fmt.Errorf("need --message ID, or --source-partition P and --offset N (a source record: its id changes at every retry)")
	case *r.Offset < 0:
		return "", fmt.Errorf("--offset %d is negative", *r.Offset)
	}
	return tables.SourceIdentity(r.SourcePartition, uint64(*r.Offset)), nil
}

// record writes r's skip record to st and says what happened on w.
func (r skipRequest) record(ctx context.Context, st store.Store, w io.Writer) error {
	id, err := r.identity()
	if err != nil {
		return err
	}
	already, err := tables.RecordSkip(ctx, st, r.Computation, id, r.Reason, time.Now())
	if err != nil {
		return err
	}
	what := "message " + echo(r.Message)
	if r.Message == "" {
		what = fmt.Sprintf("source partition %s offset %d", echo(r.SourcePartition), *r.Offset)
	}
	if already {
		fmt.Fprintf(w, "%s: %s was already skipped\n", echo(r.Computation), what)
		return nil
	}
	fmt.Fprintf(w, "%s: %s will be skipped (a failing partition picks this up at its next restart; with a dead_letter_stream it becomes a dead letter)\n", echo(r.Computation), what)
	return nil
}

// runSkip is 'weir pipeline skip'.
func runSkip(o *Options, args []string) error {
	fs := newFlags(o, "pipeline skip", "(--data DIR | --store URL) --computation NAME (--message ID | --source-partition P --offset N) [--reason TEXT]",
		"Records in the store that one input message of a computation is not to be processed:\n"+
			"its partition consumes it without calling the computation's code (with a\n"+
			"dead_letter_stream, it becomes a dead letter). The error of a failing\n"+
			"partition names the message: its id, or for a source record the source\n"+
			"partition and offset. The record holds for every later run; a running\n"+
			"pipeline's failing partition picks it up at its next restart.")
	loc := addLocation(fs)
	var req skipRequest
	fs.StringVar(&req.Computation, "computation", "", "the computation that fails on the message (required)")
	fs.StringVar(&req.Message, "message", "", "the message id (a message of an internal stream)")
	fs.StringVar(&req.SourcePartition, "source-partition", "", "the source partition of a source record")
	offset := fs.Int64("offset", -1, "the offset of a source record in its source partition")
	fs.StringVar(&req.Reason, "reason", "", "why, kept with the record")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected arguments: %s", echoArgs(pos))
	}
	if err := loc.check(fs); err != nil {
		return err
	}
	if *offset >= 0 || req.SourcePartition != "" {
		req.Offset = offset
	}
	if _, err := req.identity(); err != nil {
		return usageErr(fs, "%v", err)
	}
	remote, err := withStore(loc, false, func(st store.Store) error { return req.record(context.Background(), st, o.Stdout) })
	if err != nil || remote == nil {
		return err
	}
	body, _ := json.Marshal(req)
	return remote.call(http.MethodPost, "/pipeline/skip", "application/json", bytes.NewReader(body), o.Stdout)
}
