package cli

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/msgid"
)

// TestConsoleErrorOrigin: the failures view takes apart the text of the
// job's own UserCodeError (built here, so that a change of its format
// fails this test): the call, the message, the source origin and the
// cause, also when wrapped and with a panic's frames.
func TestConsoleErrorOrigin(t *testing.T) {
	id := msgid.Ordered(7, "events", 70)
	cases := []struct {
		err  error
		want failureOrigin
	}{
		{&job.UserCodeError{Computation: "Check", Partition: "Check@0", Call: "message", Messages: []msgid.ID{id},
			Source: "events", SourcePartition: "0", Offsets: []connector.Offset{70}, Err: errors.New("Refuse: this row is poison")},
			failureOrigin{Call: "message", Message: string(id), Source: "events", SourcePartition: "0", Offset: "70", Cause: "Refuse: this row is poison"}},
		{fmt.Errorf("job Work/1#3: %w", &job.UserCodeError{Computation: "Work", Partition: "Work/1", Call: "key batch",
			Messages: []msgid.ID{id, msgid.Ordered(7, "events", 71)}, Panic: "boom", Stack: []string{"main.f (main.go:3)"}, Err: errors.New("panic: boom")}),
			failureOrigin{Call: "key batch", Message: string(id), Cause: "panic: boom"}},
		{&job.UserCodeError{Computation: "Work", Partition: "Work/0", Call: "timer", Timer: id, Err: errors.New("late")},
			failureOrigin{Call: "timer", Message: string(id), Cause: "late"}},
	}
	for _, c := range cases {
		comp := "Check"
		var u *job.UserCodeError
		if errors.As(c.err, &u) {
			comp = u.Computation
		}
		got := errorOrigin(comp, c.err.Error())
		if got == nil || *got != c.want {
			t.Errorf("%q:\n got %+v\nwant %+v", c.err, got, c.want)
		}
	}
	if o := errorOrigin("Work", "lease lost"); o != nil {
		t.Errorf("a store error parsed as %+v", o)
	}
}

// TestConsoleRates: rates are averaged over the named window, not the
// last second: a burst in one second of ten shows as a tenth of it.
func TestConsoleRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var ss []consoleSample
	for i := 0; i <= 20; i++ {
		in := uint64(0)
		if i >= 15 {
			in = 1000 // 1,000 inputs between seconds 14 and 15
		}
		ss = append(ss, consoleSample{at: t0.Add(time.Duration(i) * time.Second), comps: map[string]board.Counters{"C": {Inputs: in}}})
	}
	n := len(ss) - 1
	for _, c := range []struct {
		w    time.Duration
		want float64
	}{{10 * time.Second, 100}, {5 * time.Second, 0}, {20 * time.Second, 50}, {time.Second, 0}} {
		j := windowStart(ss, n, c.w)
		got := rateOf(ss[j].comps["C"], ss[n].comps["C"], ss[n].at.Sub(ss[j].at).Seconds()).Inputs
		if got != c.want {
			t.Errorf("window %v: %v/s, want %v/s", c.w, got, c.want)
		}
	}
	if w := parseWindow("1m"); w != time.Minute {
		t.Errorf("parseWindow(1m) = %v", w)
	}
	if w := parseWindow("junk"); w != defaultRateWindow {
		t.Errorf("parseWindow(junk) = %v", w)
	}
	if w := parseWindow("24h"); w != consoleHistory*consoleSamplePeriod {
		t.Errorf("parseWindow(24h) = %v", w)
	}
}
