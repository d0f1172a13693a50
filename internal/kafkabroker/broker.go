// Package kafkabroker runs real Apache Kafka brokers — the server published
// on Maven Central, in KRaft mode, no ZooKeeper — on loopback for weir's
// tests and for the Kafka rows of 'weir bench'.
//
// The jars come from pom.xml beside this file, fetched by Maven into a
// cache outside the repository (Jars; Jars.Fetcher is the command).
// Start formats each node's storage with one cluster id and starts one JVM
// per node, each a combined broker and controller (process.roles =
// broker,controller) on two free loopback ports; every node is a voter of
// the controller quorum. Nodes are stopped by PID (SIGTERM, then SIGKILL),
// and can be killed and restarted on the same ports and data, which is how
// the tests bounce and crash brokers.
//
// The replication settings follow the node count (Settings): with one node
// every replication factor and min.insync.replicas are 1; with three, topics
// and the internal topics (__consumer_offsets, __transaction_state) are
// replicated 3 times with min.insync.replicas 2, so that one node may be
// lost without refusing acks=all writes or transactions.
package kafkabroker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir/internal/freeport"
	"github.com/weir-stream/weir/internal/mavenlibs"
)

// Version is the Apache Kafka release the tests run (pom.xml's
// kafka.version).
const Version = "4.4.0"

// Jars are the broker's jars (pom.xml beside this file): in $WEIR_KAFKA_LIBS,
// or weir/kafka-<Version>/libs under the user's cache directory.
var Jars = mavenlibs.Libs{
	Name: "kafka", Version: Version, Env: "WEIR_KAFKA_LIBS",
	Pom:     filepath.Join("internal", "kafkabroker", "pom.xml"),
	Marker:  "kafka_2.13-" + Version + ".jar",
	Fetcher: "go run ./internal/kafkabroker/cmd/kafkafetch",
}

// Available reports why a broker cannot be started here (no java on the
// PATH, the jars not fetched), or nil.
func Available() error {
	if err := Jars.Available(); err != nil {
		return fmt.Errorf("an Apache Kafka broker %w", err)
	}
	return nil
}

// Config describes a cluster to start.
type Config struct {
	// Nodes is the number of nodes (1 by default), each a broker and a
	// controller.
	Nodes int
	// Dir holds the nodes' data, configuration and logs; it must exist.
	Dir string
	// Props are extra server properties, set on every node; they override
	// Settings.
	Props map[string]string
	// HeapMB is each JVM's maximum heap (512 by default).
	HeapMB int
}

// Settings are the server properties weir's tests and bench use for a
// cluster of n nodes, besides the listeners and the quorum.
//
//   - Replication follows n: one node — every replication factor 1,
//     min.insync.replicas 1; more — replication factor 3 (or n if
//     smaller) for topics, __consumer_offsets and __transaction_state,
//     min.insync.replicas (and transaction.state.log.min.isr) one less,
//     so that losing one node refuses no acks=all write or transaction.
//   - Internal topics get 4 partitions instead of 50: created on first use,
//     50 partitions cost seconds of a test's time on 2 cores.
//   - transaction.abort.timed.out.transaction.cleanup.interval.ms is 1 s
//     (10 s by default): a transaction past its transaction.timeout.ms is
//     aborted by the coordinator within a second, which the
//     broker-side-timeout test waits for.
//   - auto.create.topics.enable is off: a test names the topics it needs
//     and creates them, so a misspelled topic fails instead of appearing.
//   - group.initial.rebalance.delay.ms 0: a consumer group forms at once.
//   - log.retention.ms -1: nothing is deleted by age. Time retention goes
//     by the records' own timestamps, and tests write records dated in
//     the past; a retention pass (30 s after start, then every 5 minutes)
//     would delete them mid-test and look like lost data.
func Settings(n int) map[string]string {
	rf := min(n, 3)
	isr := max(rf-1, 1)
	return map[string]string{
		"offsets.topic.replication.factor":                            strconv.Itoa(rf),
		"offsets.topic.num.partitions":                                "4",
		"transaction.state.log.replication.factor":                    strconv.Itoa(rf),
		"transaction.state.log.min.isr":                               strconv.Itoa(isr),
		"transaction.state.log.num.partitions":                        "4",
		"default.replication.factor":                                  strconv.Itoa(rf),
		"min.insync.replicas":                                         strconv.Itoa(isr),
		"num.partitions":                                              "1",
		"auto.create.topics.enable":                                   "false",
		"group.initial.rebalance.delay.ms":                            "0",
		"log.retention.ms":                                            "-1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
		"share.coordinator.state.topic.replication.factor":            strconv.Itoa(rf),
		"share.coordinator.state.topic.min.isr":                       strconv.Itoa(isr),
	}
}

// Node is one broker-and-controller process.
type Node struct {
	ID             int
	Port           int // the client listener
	ControllerPort int
	dir            string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Addr is the node's client address, host:port.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// LogPath is the node's server log.
func (n *Node) LogPath() string { return filepath.Join(n.dir, "server.log") }

// Cluster is a running set of nodes.
type Cluster struct {
	cfg       Config
	clusterID string
	Nodes     []*Node
}

// Start formats and starts a cluster, returning once every node answers
// as a broker. On error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	if cfg.HeapMB <= 0 {
		cfg.HeapMB = 512
	}
	ports, err := freeport.Loopback(2 * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, clusterID: newClusterID()}
	for i := 0; i < cfg.Nodes; i++ {
		n := &Node{ID: i + 1, Port: ports[2*i], ControllerPort: ports[2*i+1], dir: filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i+1))}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := c.format(ctx, n); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.launch(n); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns every node's client address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// ListenAddrs is Addrs, under the name kfake.Cluster gives it, so that
// test helpers can take either.
func (c *Cluster) ListenAddrs() []string { return c.Addrs() }

// newClusterID returns a random Kafka cluster id: 16 bytes in URL-safe
// base64, not starting with '-' (Kafka's Uuid.randomUuid rule: the tools
// would take it for an option).
func newClusterID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// properties writes n's server.properties and returns its path.
func (c *Cluster) properties(n *Node) (string, error) {
	var voters []string
	for _, m := range c.Nodes {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", m.ID, m.ControllerPort))
	}
	props := map[string]string{
		"process.roles":                        "broker,controller",
		"node.id":                              strconv.Itoa(n.ID),
		"controller.quorum.voters":             strings.Join(voters, ","),
		"listeners":                            fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.Port, n.ControllerPort),
		"advertised.listeners":                 fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.Port),
		"controller.listener.names":            "CONTROLLER",
		"listener.security.protocol.map":       "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":           "PLAINTEXT",
		"log.dirs":                             filepath.Join(n.dir, "data"),
		"controlled.shutdown.max.retries":      "1",
		"controlled.shutdown.retry.backoff.ms": "500",
	}
	for k, v := range Settings(len(c.Nodes)) {
		props[k] = v
	}
	for k, v := range c.cfg.Props {
		props[k] = v
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(n.dir, "server.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	logCfg := "status = warn\n" +
		"appender.file.type = File\nappender.file.name = FILE\n" +
		"appender.file.fileName = " + n.LogPath() + "\n" +
		"appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\n" +
		"rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = FILE\n" +
		"logger.kafka.name = org.apache.kafka\nlogger.kafka.level = INFO\n"
	if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(logCfg), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// java builds a java command line with the jars on the class path.
func (c *Cluster) java(n *Node, heapMB int, class string, args ...string) *exec.Cmd {
	argv := []string{
		fmt.Sprintf("-Xmx%dm", heapMB), "-Xms64m", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.dir, "log4j2.properties"),
		"-cp", Jars.Classpath(), class,
	}
	cmd := exec.Command("java", append(argv, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (c *Cluster) format(ctx context.Context, n *Node) error {
	path, err := c.properties(n)
	if err != nil {
		return err
	}
	cmd := c.java(n, 256, "kafka.tools.StorageTool", "format", "-t", c.clusterID, "-c", path, "--ignore-formatted")
	out, err := runWithContext(ctx, cmd)
	if err != nil {
		return fmt.Errorf("kafka storage format of node %d: %w: %s", n.ID, err, strings.TrimSpace(out))
	}
	return nil
}

func runWithContext(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return out.String(), ctx.Err()
	}
}

// launch starts n's JVM; its stdout and stderr go to n's dir/stdout.log.
func (c *Cluster) launch(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("kafka node %d is running", n.ID)
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := c.java(n, c.cfg.HeapMB, "kafka.Kafka", filepath.Join(n.dir, "server.properties"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start kafka node %d: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		out.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	return nil
}

// Kill sends SIGKILL to node i (0-based) and waits for it to exit: a
// crash, with whatever the broker had not flushed lost.
func (c *Cluster) Kill(i int) { c.Nodes[i].stop(syscall.SIGKILL, 0) }

// Stop stops node i with SIGTERM (a controlled shutdown), then SIGKILL
// after 30 s.
func (c *Cluster) Stop(i int) { c.Nodes[i].stop(syscall.SIGTERM, 30*time.Second) }

// Restart starts node i again on its ports and data (after Kill or Stop)
// and waits until the cluster has every node as a broker again.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.launch(c.Nodes[i]); err != nil {
		return err
	}
	return c.WaitReady(ctx)
}

// Running reports whether node i's process is running.
func (c *Cluster) Running(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

func (n *Node) stop(sig syscall.Signal, grace time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
			cmd.Process.Kill()
		}
	}
	<-done
}

// Close stops every node (SIGTERM, then SIGKILL after 10 s).
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.stop(syscall.SIGTERM, 10*time.Second)
		}()
	}
	wg.Wait()
}

// WaitReady waits until every running node is a broker of the cluster's
// metadata, as seen through each of them, or ctx ends; a node that exits
// meanwhile is an error naming the end of its log.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var running []*Node
	for i, n := range c.Nodes {
		if c.Running(i) {
			running = append(running, n)
		}
	}
	var last error
	for {
		for _, n := range running {
			select {
			case <-n.done:
				return fmt.Errorf("kafka node %d exited while starting\n%s", n.ID, tail(n.LogPath(), 2000)+tail(filepath.Join(n.dir, "stdout.log"), 2000))
			default:
			}
		}
		last = c.ready(ctx, running)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka cluster not ready: %v (%w)", last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) ready(ctx context.Context, running []*Node) error {
	for _, n := range running {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DialTimeout(2*time.Second))
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := kadm.NewClient(cl).BrokerMetadata(rctx)
		cancel()
		cl.Close()
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		if len(md.Brokers) < len(running) {
			return fmt.Errorf("node %d sees %d brokers, want %d", n.ID, len(md.Brokers), len(running))
		}
	}
	return nil
}

// Client returns a franz-go client of the cluster with opts added.
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
}

// CreateTopics creates topics (name → partition count) with the cluster's
// default replication factor and waits until each has a leader for every
// partition.
func (c *Cluster) CreateTopics(ctx context.Context, topics map[string]int32) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for name, parts := range topics {
		res, err := adm.CreateTopic(ctx, parts, -1, nil, name)
		if err != nil {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
		if res.Err != nil {
			return fmt.Errorf("create topic %s: %w", name, res.Err)
		}
	}
	return waitLed(ctx, adm, topics)
}

// waitLed waits until the metadata shows every topic with at least its
// partition count, each partition with a leader: a producer that learns the
// metadata after that sees them all.
func waitLed(ctx context.Context, adm *kadm.Client, topics map[string]int32) error {
	for {
		md, err := adm.Metadata(ctx, topicNames(topics)...)
		if err == nil && topicsLed(md, topics) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %v not led in time: %v (%w)", topicNames(topics), err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// AddPartitions grows topic to n partitions and waits until each has a
// leader (a client created after it returns can produce to all n).
func (c *Cluster) AddPartitions(ctx context.Context, topic string, n int) error {
	cl, err := c.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.UpdatePartitions(ctx, n, topic)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("add partitions to %s: %w", topic, r.Err)
		}
	}
	return waitLed(ctx, adm, map[string]int32{topic: int32(n)})
}

func topicNames(topics map[string]int32) []string {
	var out []string
	for n := range topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func topicsLed(md kadm.Metadata, topics map[string]int32) bool {
	for name, parts := range topics {
		td, ok := md.Topics[name]
		if !ok || td.Err != nil || int32(len(td.Partitions)) < parts {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
	}
	return true
}

// LogTails returns the end of every node's log, for a failure message.
func (c *Cluster) LogTails() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		b.WriteString(tail(n.LogPath(), 3000))
		b.WriteString(tail(filepath.Join(n.dir, "stdout.log"), 1000))
	}
	return b.String()
}

func tail(path string, size int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > size {
		b = b[len(b)-size:]
	}
	return "--- " + path + ":\n" + string(b) + "\n"
}
