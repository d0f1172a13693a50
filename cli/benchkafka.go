package cli

// The Kafka rows of 'weir bench': weir's Kafka example (KafkaSource →
// Counter → KafkaSink, exactly-once) against the hand-written franz-go
// transactional loop with its counts in the store
// (handwritten.KafkaCounter), on kfake — franz-go's in-process Kafka — or
// on a real Apache Kafka broker (internal/kafkabroker: one KRaft node, a
// JVM), or both side by side (--kafka-broker). The broker runs in a process
// of its own ('weir bench --broker'; the JVM is that process's child), so
// that each row's CPU and peak RSS are the client's alone. Each row gets a
// fresh broker; the events are written to it before the clock starts.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/internal/codec"
	"github.com/weir-stream/weir/internal/handwritten"
	"github.com/weir-stream/weir/internal/kafkabroker"
	"github.com/weir-stream/weir/store"
)

// The topics of the Kafka example (examples/kafka), 4 partitions each.
const (
	benchInTopic    = "page-views"
	benchOutTopic   = "page-view-counts"
	benchPartitions = 4
)

// The brokers a Kafka row can run against (benchCase.Broker).
const (
	brokerKfake = "kfake" // franz-go's in-process fake, in a Go process
	brokerKafka = "kafka" // Apache Kafka (kafkabroker.Version), one KRaft node
)

// The two Kafka rows, per broker (kafkaRowName).
const (
	kafkaWeirRow = "weir (KafkaSource → Counter → KafkaSink)"
	kafkaHandRow = "hand-written franz-go txn loop (Pebble)"
)

func isKafkaCase(c benchCase) bool { return c.Kind == "kafka" || c.Kind == "kafka-handwritten" }

// caseBroker is the broker c runs against: c.Broker, kfake by default.
func caseBroker(c benchCase) string {
	if c.Broker == "" {
		return brokerKfake
	}
	return c.Broker
}

// brokerLabel names a broker in row names and notes.
func brokerLabel(broker string) string {
	if broker == brokerKafka {
		return "Apache Kafka " + kafkabroker.Version
	}
	return "kfake"
}

// kafkaRowName is the name of a Kafka row (kafkaWeirRow, kafkaHandRow) on
// broker: "kafka (kfake): …", "kafka (Apache Kafka 4.4.0): …".
func kafkaRowName(broker, row string) string {
	return fmt.Sprintf("kafka (%s): %s", brokerLabel(broker), row)
}

// parseKafkaBrokers reads --kafka-broker: kfake, real (or kafka) or both.
// A real broker must be startable here (kafkabroker.Available).
func parseKafkaBrokers(v string) ([]string, error) {
	var bs []string
	switch v {
	case "", "kfake":
		return []string{brokerKfake}, nil
	case "real", "kafka":
		bs = []string{brokerKafka}
	case "both":
		bs = []string{brokerKfake, brokerKafka}
	default:
		return nil, fmt.Errorf("--kafka-broker %q: want kfake, real or both", v)
	}
	if err := kafkabroker.Available(); err != nil {
		return nil, fmt.Errorf("--kafka-broker %s: %w", v, err)
	}
	return bs, nil
}

// benchBrokerInfo is what 'weir bench --broker' prints once its broker is
// ready: the addresses, and the CPU the process and its children (the
// JVMs of a real broker: storage format, then the broker) had used by
// then, so that the broker's figures can leave its startup out.
type benchBrokerInfo struct {
	Addrs      []string      `json:"addrs"`
	StartupCPU time.Duration `json:"startup_cpu_ns"`
}

// runBenchBroker runs a one-broker cluster (kfake, or Apache Kafka with
// kafkabroker) on loopback with the example's topics, prints a
// benchBrokerInfo line on stdout and returns when stdin closes.
func runBenchBroker(o *Options, broker string) error {
	var addrs []string
	switch broker {
	case brokerKfake:
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchPartitions, benchInTopic, benchOutTopic))
		if err != nil {
			return fmt.Errorf("start kfake: %w", err)
		}
		defer c.Close()
		addrs = c.ListenAddrs()
	case brokerKafka:
		dir, err := os.MkdirTemp("", "weir-bench-kafka-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := kafkabroker.Start(ctx, kafkabroker.Config{Nodes: 1, Dir: dir})
		if err != nil {
			return fmt.Errorf("start Apache Kafka %s: %w", kafkabroker.Version, err)
		}
		defer c.Close()
		if err := c.CreateTopics(ctx, map[string]int32{benchInTopic: benchPartitions, benchOutTopic: benchPartitions}); err != nil {
			return fmt.Errorf("%w\n%s", err, c.LogTails())
		}
		if err := warmCoordinators(ctx, c.Addrs()); err != nil {
			return fmt.Errorf("%w\n%s", err, c.LogTails())
		}
		addrs = c.Addrs()
	default:
		return fmt.Errorf("unknown Kafka broker %q (want %s or %s)", broker, brokerKfake, brokerKafka)
	}
	if err := json.NewEncoder(o.Stdout).Encode(benchBrokerInfo{Addrs: addrs, StartupCPU: selfCPU() + childrenCPU()}); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, o.Stdin)
	return err
}

// warmCoordinators makes a fresh Apache Kafka broker create its internal
// topics (__consumer_offsets, __transaction_state; created on the first
// FindCoordinator of their kind) and elect their coordinators before a row
// starts, as on a broker in service: kfake has them at once, and a row
// should not time a one-off topic creation. The keys cover the internal
// topics' 4 partitions with near certainty.
func warmCoordinators(ctx context.Context, addrs []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	keys := []string{"bench-handwritten", "weir-page-view-counter"}
	for i := 0; i < 32; i++ {
		keys = append(keys, fmt.Sprintf("bench-warm-%d", i))
	}
	for {
		var last error
		for _, r := range adm.FindGroupCoordinators(ctx, keys...) {
			if r.Err != nil {
				last = fmt.Errorf("group coordinator of %s: %w", r.Name, r.Err)
			}
		}
		for _, r := range adm.FindTxnCoordinators(ctx, keys...) {
			if r.Err != nil {
				last = fmt.Errorf("transaction coordinator of %s: %w", r.Name, r.Err)
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the broker's coordinators are not ready: %v (%w)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// childrenCPU is the CPU time (user + system) of this process's children:
// those waited for, and those still running (read from /proc, Linux).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	var total time.Duration
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		total = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := os.Getpid()
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: fields 4, 14 and 15.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * (time.Second / 100) // USER_HZ
	}
	return total
}

// startBenchBroker starts 'self bench --broker' for broker and returns the
// broker's addresses and a function that stops it and returns its resource
// usage from its start (its process's and its children's: the JVMs of a
// real broker) and the CPU it had used when it became ready.
func startBenchBroker(self, broker string) (addrs []string, stop func() (*syscall.Rusage, time.Duration, error), err error) {
	cmd := exec.Command(self, "bench", "--broker", "--kafka-broker", broker)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	name := brokerLabel(broker) + " broker"
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the %s: %w", name, err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		sc.Scan()
		line <- sc.Text()
		io.Copy(io.Discard, stdout)
	}()
	var info benchBrokerInfo
	stop = func() (*syscall.Rusage, time.Duration, error) {
		stdin.Close()
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(errb.String()))
		}
		ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return ru, info.StartupCPU, err
	}
	// A JVM broker takes a while on a loaded machine: format, start,
	// topics, coordinators.
	wait := 30 * time.Second
	if broker == brokerKafka {
		wait = 4 * time.Minute
	}
	select {
	case l := <-line:
		if json.Unmarshal([]byte(l), &info) != nil {
			info = benchBrokerInfo{}
		}
	case <-time.After(wait):
	}
	if len(info.Addrs) == 0 {
		cmd.Process.Kill()
		_, _, err := stop()
		return nil, nil, fmt.Errorf("the %s did not print its address: %v", name, err)
	}
	return info.Addrs, stop, nil
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
	addrs, stop, err := startBenchBroker(self, caseBroker(c))
	if err != nil {
		return nil, nil, err
	}
	return addrs, func() { stop() }, nil
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
