package kafkabroker

import (
	"context"
	_ "embed"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Record is one record as the Java oracle printed it.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

//go:embed java/ReadCommitted.java
var readCommittedJava []byte

// ConsumeCommitted reads every record of topic visible at
// isolation.level=read_committed with Apache Kafka's own Java consumer
// (java/ReadCommitted.java: KafkaConsumer from the same download as the
// broker): a reader nobody on this project wrote, used as the tests'
// oracle. It assigns itself every partition (no consumer group, so no
// coordinator is waited for), reads from the beginning, and ends at each
// partition's last stable offset as of its start — let the writers finish
// first. Keys and values must be text without tabs or newlines.
//
// It first waits until no transaction is open on topic (WaitStable): a
// transaction whose commit was acknowledged may still lack its markers —
// the coordinator writes them after answering, and a broker restarted
// meanwhile writes them once it has loaded its transaction log — and
// until then read_committed ends before it.
func (c *Cluster) ConsumeCommitted(ctx context.Context, topic string) ([]Record, error) {
	if err := c.WaitStable(ctx, topic); err != nil {
		return nil, err
	}
	dir, err := Jars.Compile("ReadCommitted", readCommittedJava)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for i, n := range c.Nodes {
		if c.Running(i) {
			addrs = append(addrs, n.Addr())
		}
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", Jars.Classpath(dir),
		"-Dlog4j2.level=warn", "ReadCommitted", strings.Join(addrs, ","), topic)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("java ReadCommitted %s: %w\n%s", topic, err, stderr.String())
	}
	recs, err := parseRecords(stdout.String())
	if err != nil {
		return nil, fmt.Errorf("java ReadCommitted %s: %w", topic, err)
	}
	return recs, nil
}

// WaitStable waits until every partition of topic has its last stable
// offset at (or, seen after an unclean restart, past) its high watermark:
// no transaction is open below what a consumer may read, so read_committed
// sees all that was written.
func (c *Cluster) WaitStable(ctx context.Context, topic string) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		hw, err := adm.ListEndOffsets(ctx, topic)
		var lso kadm.ListedOffsets
		if err == nil {
			lso, err = adm.ListCommittedOffsets(ctx, topic)
		}
		if err == nil && stable(hw, lso) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: a transaction is still open (%v): %w", topic, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func stable(hw, lso kadm.ListedOffsets) bool {
	ok := true
	hw.Each(func(o kadm.ListedOffset) {
		l, found := lso.Lookup(o.Topic, o.Partition)
		if o.Err != nil || !found || l.Err != nil || l.Offset < o.Offset {
			ok = false
		}
	})
	return ok
}

// parseRecords parses lines "PARTITION\tOFFSET\tKEY\tVALUE".
func parseRecords(out string) ([]Record, error) {
	var recs []Record
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		p, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		o, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		recs = append(recs, Record{Partition: int32(p), Offset: o, Key: f[2], Value: f[3]})
	}
	return recs, nil
}
