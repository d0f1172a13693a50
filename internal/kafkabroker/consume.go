package kafkabroker

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

var (
	oracleOnce sync.Once
	oracleDir  string
	oracleErr  error
)

// oracle compiles java/ReadCommitted.java against the Kafka jars (once per
// process, into a directory beside LibDir named by the source's hash) and
// returns the directory holding the class.
func oracle() (string, error) {
	oracleOnce.Do(func() {
		sum := sha256.Sum256(append(readCommittedJava, Version...))
		dir := filepath.Join(filepath.Dir(LibDir()), "oracle-"+hex.EncodeToString(sum[:6]))
		if _, err := os.Stat(filepath.Join(dir, "ReadCommitted.class")); err == nil {
			oracleDir = dir
			return
		}
		tmp, err := os.MkdirTemp(filepath.Dir(LibDir()), "oracle-build-")
		if err != nil {
			oracleErr = err
			return
		}
		defer os.RemoveAll(tmp)
		src := filepath.Join(tmp, "ReadCommitted.java")
		if err := os.WriteFile(src, readCommittedJava, 0o644); err != nil {
			oracleErr = err
			return
		}
		out, err := exec.Command("javac", "-nowarn", "-cp", filepath.Join(LibDir(), "*"), "-d", tmp, src).CombinedOutput()
		if err != nil {
			oracleErr = fmt.Errorf("javac ReadCommitted.java: %w: %s", err, out)
			return
		}
		os.Remove(src)
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(dir, "ReadCommitted.class")); serr != nil {
				oracleErr = err
				return
			}
		}
		oracleDir = dir
	})
	return oracleDir, oracleErr
}

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
	dir, err := oracle()
	if err != nil {
		return nil, err
	}
	var addrs []string
	for i, n := range c.Nodes {
		if c.Running(i) {
			addrs = append(addrs, n.Addr())
		}
	}
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", filepath.Join(LibDir(), "*")+string(os.PathListSeparator)+dir,
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
