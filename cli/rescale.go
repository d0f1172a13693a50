package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
)

// rescaleRequest is the body of POST /pipeline/rescale (weir run and weir
// controller): {"computation": NAME, "partitions": N}. Partitions is a
// pointer so that a missing field is told from 0.
type rescaleRequest struct {
	Computation string `json:"computation"`
	Partitions  *int   `json:"partitions"`
}

// checkPartitions checks a rescale's partition count; what names it in the
// error (the CLI's argument N, the API's field "partitions").
func checkPartitions(what string, n int) error {
	if n < 1 || n > spec.MaxPartitionCount {
		return fmt.Errorf("%s is %d: want a partition count from 1 to %d (spec.MaxPartitionCount)", what, n, spec.MaxPartitionCount)
	}
	return nil
}

// decodeRescale reads and checks the body of POST /pipeline/rescale
// against eng's plan: an error names the field at fault.
func decodeRescale(w http.ResponseWriter, req *http.Request, eng *engine.Engine) (rescaleRequest, error) {
	var rr rescaleRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rr); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			want := "a string"
			if te.Field == "partitions" {
				want = "an integer"
			}
			return rr, fmt.Errorf("field %q: a JSON %s; want %s", te.Field, te.Value, want)
		}
		return rr, fmt.Errorf(`a JSON body {"computation": NAME, "partitions": N}: %v`, err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return rr, errors.New(`a JSON body {"computation": NAME, "partitions": N}: one object, nothing after it`)
	}
	switch {
	case rr.Computation == "":
		return rr, errors.New(`field "computation": missing (the name of the keyed computation to rescale)`)
	case rr.Partitions == nil:
		return rr, errors.New(`field "partitions": missing (the new partition count)`)
	}
	if err := checkPartitions(`field "partitions"`, *rr.Partitions); err != nil {
		return rr, err
	}
	c, ok := eng.Plan().Computations[rr.Computation]
	if !ok {
		return rr, fmt.Errorf(`field "computation": the pipeline has no computation %s`, echo(rr.Computation))
	}
	if err := c.Rescalable(); err != nil {
		return rr, fmt.Errorf(`field "computation": %s cannot be rescaled: %v`, echo(rr.Computation), err)
	}
	return rr, nil
}

// serveRescale is POST /pipeline/rescale: it records the target with eng's
// controller (which carries it out while the pipeline works) and answers
// with JSON. A bad body is a 400 naming the field.
func serveRescale(w http.ResponseWriter, req *http.Request, eng *engine.Engine) {
	rr, err := decodeRescale(w, req, eng)
	if err != nil {
		http.Error(w, "rescale: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctl := eng.Controller()
	now := ctl.Layout()[rr.Computation]
	if err := ctl.Rescale(req.Context(), rr.Computation, *rr.Partitions); err != nil {
		http.Error(w, "rescale: "+err.Error(), http.StatusInternalServerError)
		return
	}
	state := ctl.State()
	var when string
	switch {
	case now == *rr.Partitions:
		when = "it already runs on that many partitions: a rescale of it not yet committed is cancelled"
	case state == controller.Working:
		when = "it is carried out now: the computation quiesces, its new layout is committed and its jobs restart on the new key ranges; 'weir pipeline status' lists it under rescales once done"
	case state == controller.Paused || state == controller.Pausing:
		when = "the pipeline is " + string(state) + ": it is carried out once the pipeline is started again"
	default:
		when = "the pipeline is " + string(state) + ": the next run starts with the new count"
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]any{
		"recorded":    true,
		"computation": rr.Computation,
		"partitions":  *rr.Partitions,
		"current":     now,
		"state":       state,
		"message":     fmt.Sprintf("the rescale of %s to %d partitions is recorded; %s", rr.Computation, *rr.Partitions, when),
	})
}

// rescaleJSON is one rescale in GET /status ("rescales").
type rescaleJSON struct {
	Computation string     `json:"computation"`
	From        int        `json:"from"`
	To          int        `json:"to"`
	Began       time.Time  `json:"began"`
	Quiesced    *time.Time `json:"quiesced,omitempty"`
	// PauseMS is how long the computation took no input (done rescales).
	PauseMS *float64 `json:"pause_ms,omitempty"`
}

// rescalesJSON is the "rescales" member of GET /status: the finished
// rescales, oldest first, and the one under way (quiescing, or stopping
// the jobs that route by the old layout).
type rescalesJSON struct {
	Done    []rescaleJSON `json:"done"`
	Current *rescaleJSON  `json:"current"`
}

func rescalesOf(ctl *controller.Controller) rescalesJSON {
	done, cur := ctl.Rescales()
	out := rescalesJSON{Done: []rescaleJSON{}}
	conv := func(r controller.RescaleReport) rescaleJSON {
		j := rescaleJSON{Computation: r.Computation, From: r.From, To: r.To, Began: r.Began}
		if !r.Quiesced.IsZero() {
			q := r.Quiesced
			j.Quiesced = &q
		}
		return j
	}
	for _, r := range done {
		j := conv(r)
		ms := float64(r.Pause().Microseconds()) / 1000
		j.PauseMS = &ms
		out.Done = append(out.Done, j)
	}
	if cur != nil {
		j := conv(*cur)
		out.Current = &j
	}
	return out
}

// runRescale is 'weir pipeline rescale COMPUTATION N --data DIR'.
func runRescale(o *Options, args []string) error {
	fs := newFlags(o, "pipeline rescale", "--data DIR COMPUTATION N",
		"Changes a keyed computation's partition count while the pipeline runs,\n"+
			"exactly once: the computation quiesces (takes no input and delivers what\n"+
			"it emitted), its new layout is committed and its jobs restart on the new\n"+
			"key ranges; the rest of the pipeline keeps running. N is 1 to "+strconv.Itoa(spec.MaxPartitionCount)+".\n\n"+
			"The target is recorded at once (a crash or a restart carries it out);\n"+
			"'weir pipeline status' lists the rescale under \"rescales\" once done. A\n"+
			"run started later with the same spec keeps the new count; a spec with\n"+
			"another partition_count for the computation rescales to that. Source\n"+
			"computations and SwiftMaps cannot be rescaled (the error says why).\n\n"+
			"It talks to the admin API of the 'weir run' that holds DIR; under the\n"+
			"distributed mode, POST /pipeline/rescale to the active 'weir controller'.")
	dir := fs.String("data", "", "data directory of the running pipeline (required)")
	// A negative N would read as a flag: take it as the argument it is.
	var flagArgs, negative []string
	for i, a := range args {
		if a == "--" {
			flagArgs = append(flagArgs, args[i:]...)
			break
		}
		if _, err := strconv.Atoi(a); err == nil && strings.HasPrefix(a, "-") {
			negative = append(negative, a)
			continue
		}
		flagArgs = append(flagArgs, a)
	}
	pos, err := parse(fs, flagArgs)
	if err != nil {
		return err
	}
	pos = append(pos, negative...)
	if len(pos) == 0 {
		return usageErr(fs, "need COMPUTATION and N (the new partition count)")
	}
	if len(pos) != 2 {
		return usageErr(fs, "want two arguments, COMPUTATION and N; got %d: %s", len(pos), echoArgs(pos))
	}
	comp, nArg := pos[0], pos[1]
	if comp == "" {
		return usageErr(fs, "COMPUTATION is empty: want the name of a keyed computation of the spec")
	}
	n, err := strconv.Atoi(nArg)
	if err != nil {
		return usageErr(fs, "N is %s, not an integer: want the new partition count of %s, 1 to %d", echo(nArg), echo(comp), spec.MaxPartitionCount)
	}
	if err := checkPartitions("N", n); err != nil {
		return usageErr(fs, "%v", err)
	}
	if *dir == "" {
		return usageErr(fs, "need --data DIR")
	}
	if err := checkDataDir(*dir); err != nil {
		return err
	}
	c, ok := runningAdmin(*dir)
	if !ok {
		return fmt.Errorf("no weir is running on %s (start one with: weir run --data %s --spec FILE); a rescale is carried out by a running pipeline", *dir, *dir)
	}
	body, _ := json.Marshal(rescaleRequest{Computation: comp, Partitions: &n})
	return c.call(http.MethodPost, "/pipeline/rescale", "application/json", bytes.NewReader(body), o.Stdout)
}
