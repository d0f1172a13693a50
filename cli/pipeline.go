package cli

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/weir-stream/weir/spec"
)

func runPipeline(o *Options, args []string) error {
	if len(args) > 0 && args[0] == "skip" {
		return runSkip(o, args[1:])
	}
	if len(args) > 0 && args[0] == "rescale" {
		return runRescale(o, args[1:])
	}
	actions := map[string]bool{"status": true, "stop": true, "pause": true, "start": true, "console": true}
	if len(args) == 0 || !actions[args[0]] {
		return topUsage(o, "pipeline", args, `Usage: weir pipeline <status|stop|pause|start|console|skip|rescale> --data DIR

  status  print the running pipeline's state, counters and partitions (JSON);
          "failing" lists partitions whose jobs keep failing (restarted with
          backoff) with their last error, "sink_failures" sinks that gave up,
          "source_errors" sources that cannot be listed (retried),
          "rescales" the rescales done and the one under way
  stop    drain: sources stop reading, everything in flight is delivered,
          then the pipeline is stopped and 'weir run' exits
  pause   stop every job at once (in-flight data stays for the next start)
  start   resume a stopped or paused pipeline
  console print the address of the web console, with the admin token in
          its fragment (#token=…, which the browser does not send)
  skip    record that one input message of a computation is not to be
          processed ('weir pipeline skip --help'): for a poison message
          that fails its partition again and again
  rescale change a keyed computation's partition count while the pipeline
          runs, exactly once ('weir pipeline rescale --help'):
          'weir pipeline rescale COMPUTATION N --data DIR', N from 1 to `+strconv.Itoa(spec.MaxPartitionCount)+`.
          The computation quiesces, its new layout is committed and its
          jobs restart on the new key ranges; the rest of the pipeline keeps
          running. A run started later with the same spec keeps the new
          count; a spec with another partition_count rescales to that.
          Source computations and SwiftMaps cannot be rescaled (the
          error says why)

They talk to the admin API of the 'weir run' that holds DIR.

A stop requested while paused runs the jobs again until they drained:
"stopped" always means drained, and only a stopped pipeline accepts a spec
whose static part (streams, computations, sources, sinks...) changed. A
keyed computation's partition_count is the exception: a spec changing it
is a rescale, carried out at once on a drained pipeline and live on one
that is not.`)
	}
	action := args[0]
	fs := newFlags(o, "pipeline "+action, "--data DIR", "See 'weir pipeline --help'.")
	dir := fs.String("data", "", "data directory of the running pipeline (required)")
	if err := parseNoArgs(fs, args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return usageErr(fs, "need --data DIR")
	}
	c, ok := runningAdmin(*dir)
	if !ok {
		return fmt.Errorf("no weir is running on %s (start one with: weir run --data %s --spec FILE)", *dir, *dir)
	}
	switch action {
	case "status":
		return c.call(http.MethodGet, "/status", "", nil, o.Stdout)
	case "console":
		token, err := adminToken(*dir, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "http://%s/#token=%s\n", c.addr, token)
		return nil
	}
	return c.call(http.MethodPost, "/pipeline/"+action, "", nil, o.Stdout)
}
