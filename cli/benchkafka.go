package cli

// The Kafka rows of 'weir bench': weir's Kafka example (KafkaSource →
// Counter → KafkaSink, exactly-once) against the hand-written franz-go
// transactional loop with its counts in the store
// (handwritten.KafkaCounter), both on kfake — franz-go's in-process Kafka —
// run in a process of its own ('weir bench --broker') so that each row's
// CPU and peak RSS are the client's alone. Each row gets a fresh broker;
// the events are written to it before the clock starts.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/handwritten"
	"github.com/weir-stream/weir/store"
)

// The topics of the Kafka example (examples/kafka), 4 partitions each.
const (
	benchInTopic    = "page-views"
	benchOutTopic   = "page-view-counts"
	benchPartitions = 4
)

func isKafkaCase(c benchCase) bool { return c.Kind == "kafka" || c.Kind == "kafka-handwritten" }

// runBenchBroker runs a one-broker kfake cluster on loopback with the
// example's topics, prints its address on stdout and returns when stdin
// closes.
func runBenchBroker(o *Options) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchPartitions, benchInTopic, benchOutTopic))
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	fmt.Fprintln(o.Stdout, c.ListenAddrs()[0])
	_, err = io.Copy(io.Discard, o.Stdin)
	return err
}

// startBenchBroker starts 'self bench --broker' and returns the broker's
// address and a function that stops it and returns its resource usage.
func startBenchBroker(self string) (addr string, stop func() (*syscall.Rusage, error), err error) {
	cmd := exec.Command(self, "bench", "--broker")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the kfake broker: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
		io.Copy(io.Discard, stdout)
	}()
	stop = func() (*syscall.Rusage, error) {
		stdin.Close()
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("kfake broker: %w: %s", err, strings.TrimSpace(errb.String()))
		}
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return ru, err
	}
	select {
	case addr = <-line:
	case <-time.After(30 * time.Second):
	}
	if addr == "" {
		cmd.Process.Kill()
		_, err := stop()
		return "", nil, fmt.Errorf("the kfake broker did not print its address: %v", err)
	}
	return addr, stop, nil
}

// caseBrokers returns the brokers of a Kafka case: the parent's, or (a case
// run alone with --one) a broker started for it, stopped by the returned
// function.
func caseBrokers(c benchCase) ([]string, func(), error) {
	if len(c.Brokers) > 0 {
		return c.Brokers, func() {}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	addr, stop, err := startBenchBroker(self)
	if err != nil {
		return nil, nil, err
	}
	return []string{addr}, func() { stop() }, nil
}

// produceBenchEvents writes the bench's n events to the input topic as
// JSON objects keyed by "key", each to the partition weir's key hash gives
// it (as the queue rows split them).
func produceBenchEvents(ctx context.Context, brokers []string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(benchInTopic))
	if err != nil {
		return err
	}
	defer cl.Close()
	return benchEvents(n, benchPartitions, func(rows []weir.Row, ps []int) error {
		recs := make([]*kgo.Record, len(rows))
		for i, row := range rows {
			v, err := codec.AppendRowJSON(nil, row)
			if err != nil {
				return err
			}
			recs[i] = &kgo.Record{Key: []byte(row["key"].(string)), Value: v, Partition: int32(ps[i])}
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	})
}

// withKafkaInput gets the case's brokers, writes the events to the input
// topic, opens a store in dir and runs fn.
func withKafkaInput(dir string, c benchCase, fn func(ctx context.Context, brokers []string, st store.Store) error) error {
	brokers, stop, err := caseBrokers(c)
	if err != nil {
		return err
	}
	defer stop()
	st, err := openStore(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	if err := produceBenchEvents(ctx, brokers, c.Messages); err != nil {
		return fmt.Errorf("write the input topic: %w", err)
	}
	return fn(ctx, brokers, st)
}

// benchKafka runs the Kafka example against the case's broker: the
// source reads the input topic to its end (finite), the sink writes
// exactly-once. Timed from the engine's start to completion.
func benchKafka(o *Options, dir string, c benchCase, res *benchResult) error {
	p, err := benchSpec(c)
	if err != nil {
		return err
	}
	return withKafkaInput(dir, c, func(_ context.Context, brokers []string, st store.Store) error {
		list := make([]any, len(brokers))
		for i, b := range brokers {
			list[i] = b
		}
		for _, comp := range p.Computations {
			for _, s := range comp.SourceStreams {
				s.Parameters["brokers"], s.Parameters["finite"] = list, true
			}
			for _, s := range comp.Sinks {
				s.Parameters["brokers"] = list
			}
		}
		return benchRunEngine(o, st, p, c.Messages, res)
	})
}

// benchKafkaHandwritten runs handwritten.KafkaCounter (batch c.BatchRows)
// against the case's broker, with its counts in a store like weir's.
func benchKafkaHandwritten(dir string, c benchCase, res *benchResult) error {
	return withKafkaInput(dir, c, func(ctx context.Context, brokers []string, st store.Store) error {
		return timeHandwritten(c, res, func() (int, error) {
			return handwritten.KafkaCounter{Store: st, Brokers: brokers, In: benchInTopic, Out: benchOutTopic,
				Group: "bench-handwritten", Batch: c.BatchRows}.Run(ctx)
		})
	})
}

// timeHandwritten runs a hand-written loop, records its rate and checks
// that it processed every event.
func timeHandwritten(c benchCase, res *benchResult, loop func() (int, error)) error {
	clk := startBenchClock()
	n, err := loop()
	if err != nil {
		return err
	}
	clk.stop(res, c.Messages)
	if n != c.Messages {
		return fmt.Errorf("the loop processed %d events, want %d", n, c.Messages)
	}
	return nil
}
