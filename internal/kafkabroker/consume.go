package kafkabroker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record is one record as Apache Kafka's Java console consumer printed it.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// ConsumeCommitted reads every record of topic visible at
// isolation.level=read_committed with Apache Kafka's own Java console
// consumer (org.apache.kafka.tools.consumer.ConsoleConsumer, from the same
// download as the broker): a reader nobody on this project wrote, used as
// the tests' oracle. It reads from the beginning of every partition and
// returns once no record arrived for idle (the consumer's --timeout-ms), so
// the caller should let the writers finish first. Keys and values must be
// text without tabs or newlines (the output is tab-separated lines).
func (c *Cluster) ConsumeCommitted(ctx context.Context, topic string, idle time.Duration) ([]Record, error) {
	n := c.Nodes[0]
	for i := range c.Nodes {
		if c.Running(i) {
			n = c.Nodes[i]
			break
		}
	}
	cmd := c.java(n, 256, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(c.Addrs(), ","),
		"--topic", topic,
		"--from-beginning",
		"--isolation-level", "read_committed",
		"--timeout-ms", strconv.FormatInt(idle.Milliseconds(), 10),
		"--formatter-property", "print.partition=true",
		"--formatter-property", "print.offset=true",
		"--formatter-property", "print.key=true",
		"--formatter-property", "key.separator=\t",
		"--command-property", "auto.offset.reset=earliest",
		"--command-property", "enable.auto.commit=false",
		"--command-property", "group.id=weir-oracle-"+newClusterID(),
	)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Java console consumer: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		// The consumer exits non-zero on its idle timeout in some
		// versions; what it printed is what counts, and a real failure
		// shows as a parse error or a missing record.
		_ = err
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return nil, fmt.Errorf("java console consumer of %s: %w", topic, ctx.Err())
	}
	recs, err := parseConsole(stdout.String())
	if err != nil {
		return nil, fmt.Errorf("java console consumer of %s: %w\nstderr:\n%s", topic, err, stderr.String())
	}
	return recs, nil
}

// parseConsole parses lines "Partition:P\tOffset:O\tKEY\tVALUE".
func parseConsole(out string) ([]Record, error) {
	var recs []Record
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 || !strings.HasPrefix(f[0], "Partition:") || !strings.HasPrefix(f[1], "Offset:") {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		p, err := strconv.ParseInt(strings.TrimPrefix(f[0], "Partition:"), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		o, err := strconv.ParseInt(strings.TrimPrefix(f[1], "Offset:"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		recs = append(recs, Record{Partition: int32(p), Offset: o, Key: f[2], Value: f[3]})
	}
	return recs, nil
}
