package cli

import (
	"fmt"
	"net/http"
)

func runPipeline(o *Options, args []string) error {
	if len(args) > 0 && args[0] == "skip" {
		return runSkip(o, args[1:])
	}
	actions := map[string]bool{"status": true, "stop": true, "pause": true, "start": true, "console": true}
	if len(args) == 0 || !actions[args[0]] {
		return topUsage(o, "pipeline", args, `Usage: weir pipeline <status|stop|pause|start|console|skip> --data DIR

  status  print the running pipeline's state, counters and partitions (JSON);
          "failing" lists partitions whose jobs keep failing (restarted with
          backoff) with their last error, "sink_failures" sinks that gave up,
          "source_errors" sources that cannot be listed (retried)
  stop    drain: sources stop reading, everything in flight is delivered,
          then the pipeline is stopped and 'weir run' exits
  pause   stop every job at once (in-flight data stays for the next start)
  start   resume a stopped or paused pipeline
  console print the address of the web console, with the admin token in
          its fragment (#token=…, which the browser does not send)
  skip    record that one input message of a computation is not to be
          processed ('weir pipeline skip --help'): for a poison message
          that fails its partition again and again

They talk to the admin API of the 'weir run' that holds DIR.

A stop requested while paused runs the jobs again until they drained:
"stopped" always means drained, and only a stopped pipeline accepts a spec
whose static part (partition counts, streams, computations, sources,
sinks...) changed.`)
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
