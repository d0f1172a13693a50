package testhosts

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
)

// Subnet is the private network every Network's hosts live on. It is
// never routed anywhere: hosts have only its connected route.
var Subnet = netip.MustParsePrefix("10.251.0.0/24")

// ObserverAddr is the switch's own address on Subnet, the source of
// Network.Dial and the address of Network.Listen.
var ObserverAddr = netip.MustParseAddr("10.251.0.1")

// nsPrefix starts the name of every namespace this package makes, and
// dirPrefix every directory; both are followed by the owner's identity
// (see owner.go), which the stale sweep parses.
const (
	nsPrefix  = "weirth-"
	dirPrefix = "weir-testhosts-"
)

// Network is a virtual switch with hosts on it. Its methods are safe for
// concurrent use (a chaos test may cut links from several goroutines).
type Network struct {
	id   string // owner identity and sequence number: unique on this machine
	swNS string // the switch's namespace
	dir  string // logs and PostgreSQL directories

	mu       sync.Mutex
	hosts    []*Host
	byName   map[string]*Host
	procs    []*Proc
	pgs      []*Postgres
	procSeq  int
	closed   bool
	nextHost int // the last octet of the next host's address
}

var networkSeq atomic.Int64

// Require skips t, or fails it under CI=true, unless this process can make
// network namespaces: it is root and iproute2's ip and bridge and
// util-linux's setpriv are on PATH.
func Require(t testing.TB) {
	t.Helper()
	if err := missing(); err != nil {
		testproc.Missing(t, "testhosts: multi-host tests need network namespaces: "+err.Error())
	}
}

func missing() error {
	if os.Geteuid() != 0 {
		return errors.New("not root (run the test as root: ip netns needs it; CI does)")
	}
	for _, bin := range []string{"ip", "bridge", "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("no %s on PATH: apt-get install -y iproute2 util-linux", bin)
		}
	}
	return nil
}

// New makes a network with the named hosts (more can be added later with
// AddHost) and tears it down when t ends. Before its first network, a test
// binary removes what crashed test binaries left (owner.go). Without root
// or iproute2 it skips t, or fails it under CI=true (Require).
func New(t testing.TB, hosts ...string) *Network {
	t.Helper()
	Require(t)
	sweepOnce.Do(func() { sweepErr = sweepStale() })
	if sweepErr != nil {
		t.Errorf("testhosts: removing what crashed tests left: %v", sweepErr)
	}
	n, err := create(hosts...)
	if err != nil {
		t.Fatalf("testhosts: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("testhosts: teardown: %v", err)
		}
	})
	return n
}

var (
	sweepOnce sync.Once
	sweepErr  error
)

// create makes a network outside of any test (New, the benchmarks); the
// caller must Close it.
func create(hosts ...string) (n *Network, err error) {
	n = &Network{
		id:       fmt.Sprintf("%s-%d", self(), networkSeq.Add(1)),
		byName:   map[string]*Host{},
		nextHost: 2,
	}
	n.swNS = nsPrefix + n.id + "-switch"
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	if n.dir, err = os.MkdirTemp("", dirPrefix+n.id+"-"); err != nil {
		return n, err
	}
	// Servers run as unprivileged users in directories below this one.
	if err = os.Chmod(n.dir, 0o711); err != nil {
		return n, err
	}
	if err = ip("netns", "add", n.swNS); err != nil {
		return n, err
	}
	if err = ipBatch(n.swNS,
		"link set lo up",
		"link add br0 type bridge",
		"addr add "+netip.PrefixFrom(ObserverAddr, Subnet.Bits()).String()+" dev br0",
		"link set br0 up",
	); err != nil {
		return n, err
	}
	for _, h := range hosts {
		if _, err = n.AddHost(h); err != nil {
			return n, err
		}
	}
	return n, nil
}

var hostName = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

// AddHost adds a host to the network: a namespace joined to the switch,
// with the next free address of Subnet, its loopback up. A name is a
// lower-case letter and up to 11 more letters or digits, unique in the
// network.
func (n *Network) AddHost(name string) (*Host, error) {
	if !hostName.MatchString(name) {
		return nil, fmt.Errorf("host name %q: want a lower-case letter and up to 11 letters or digits", name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("network closed")
	}
	if n.byName[name] != nil {
		return nil, fmt.Errorf("host %q already exists", name)
	}
	if n.nextHost > 254 {
		return nil, fmt.Errorf("host %q: %s is full", name, Subnet)
	}
	addr := Subnet.Addr().As4()
	addr[3] = byte(n.nextHost)
	h := &Host{
		Name: name,
		Addr: netip.AddrFrom4(addr),
		net:  n,
		ns:   nsPrefix + n.id + "-h-" + name,
		port: "p-" + name,
	}
	// Recorded before it exists, so Close removes whatever part was made.
	n.hosts = append(n.hosts, h)
	n.byName[name] = h
	n.nextHost++
	if err := ip("netns", "add", h.ns); err != nil {
		return nil, err
	}
	if err := ip("-n", n.swNS, "link", "add", h.port, "up", "master", "br0", "type", "veth", "peer", "name", "eth0", "netns", h.ns); err != nil {
		return nil, err
	}
	if err := ipBatch(h.ns,
		"link set lo up",
		"addr add "+netip.PrefixFrom(h.Addr, Subnet.Bits()).String()+" dev eth0",
		"link set eth0 up",
	); err != nil {
		return nil, err
	}
	return h, nil
}

// Host returns the host named name, or nil.
func (n *Network) Host(name string) *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byName[name]
}

// Hosts returns the hosts in the order they were added.
func (n *Network) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Dir is the network's directory: process logs and PostgreSQL's data,
// removed at teardown.
func (n *Network) Dir() string { return n.dir }

// Close tears the network down: stops its PostgreSQL servers cleanly,
// kills every process of every host, deletes the namespaces and removes
// the directory. New calls it when the test ends; it may be called
// earlier, and again (then it does nothing).
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	hosts, pgs := append([]*Host(nil), n.hosts...), append([]*Postgres(nil), n.pgs...)
	n.mu.Unlock()

	var errs []error
	for _, pg := range pgs {
		pg.srv.Stop()
	}
	for _, h := range hosts {
		if err := h.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range hosts {
		if err := deleteNetns(h.ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := deleteNetns(n.swNS); err != nil {
		errs = append(errs, err)
	}
	if n.dir != "" {
		if err := os.RemoveAll(n.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ip runs iproute2's ip with args.
func ip(args ...string) error { return run("ip", args...) }

// ipBatch runs ip commands inside namespace ns in one ip process.
func ipBatch(ns string, cmds ...string) error {
	c := exec.Command("ip", "-n", ns, "-batch", "-")
	c.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -n %s -batch (%s): %w: %s", ns, strings.Join(cmds, "; "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// deleteNetns kills what is left in namespace ns and deletes it; a
// namespace that does not exist (never made, or removed by a concurrent
// sweep) is not an error.
func deleteNetns(ns string) error {
	if _, err := os.Stat(netnsPath(ns)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := killAll(ns); err != nil {
		return err
	}
	err := ip("netns", "delete", ns)
	if _, serr := os.Stat(netnsPath(ns)); errors.Is(serr, os.ErrNotExist) {
		return nil
	}
	return err
}

func netnsPath(ns string) string { return "/run/netns/" + ns }
