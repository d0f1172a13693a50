package testhosts

// Tests that hosts are machines on one network: real TCP connections
// between processes in different hosts, and the link faults — a partition
// drops traffic both ways silently and healing restores it; a pulled cable
// cuts the host off until plugged — touching only the host they are
// applied to.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func TestHostsReachEachOther(t *testing.T) {
	n := New(t, "a", "b", "c")
	a, b, c := n.Host("a"), n.Host("b"), n.Host("c")
	if a.Addr.String() != "10.251.0.2" || c.Addr.String() != "10.251.0.4" {
		t.Fatalf("addresses %s, %s, %s: want 10.251.0.2.. in order", a.Addr, b.Addr, c.Addr)
	}
	startHelper(t, b, "echo", b.Address(7000))
	for _, from := range []*Host{a, c} {
		if out := mustRunHelper(t, from, "dial", b.Address(7000), "30s"); out != "echo: ping\n" {
			t.Fatalf("%s → %s: %q, want the echo", from.Name, b.Name, out)
		}
	}
	// The server is in b only: b's address is nobody else's, and a's
	// loopback is a's own.
	if out, code := runHelper(t, a, "dial", "127.0.0.1:7000", "300ms"); code == helperOK {
		t.Fatalf("a reached b's server on its own loopback: %q", out)
	}
}

// TestTestProcessSockets checks the sockets the test process itself puts
// on the network: on the switch (Network.Dial, Network.Listen) and inside
// a host (Host.Dial, Host.Listen).
func TestTestProcessSockets(t *testing.T) {
	n := New(t, "a", "b")
	a, b := n.Host("a"), n.Host("b")
	startHelper(t, b, "echo", b.Address(7000))

	for name, dial := range map[string]func(context.Context, string, string) (net.Conn, error){
		"from the switch": n.Dial,
		"from host a":     a.Dial,
	} {
		if got := pingWithin(t, dial, b.Address(7000), 30*time.Second); got != nil {
			t.Fatalf("%s to b: %v", name, got)
		}
	}

	for name, listen := range map[string]func(string, string) (net.Listener, error){
		"on the switch": n.Listen,
		"in host b":     b.Listen,
	} {
		addr := ObserverAddr.String() + ":0"
		if name == "in host b" {
			addr = b.Address(0)
		}
		l, err := listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", name, err)
		}
		go serveEcho(l)
		if out := mustRunHelper(t, a, "dial", l.Addr().String(), "30s"); out != "echo: ping\n" {
			t.Fatalf("a to the test's server %s: %q", name, out)
		}
		l.Close()
	}

	if _, err := n.Dial(context.Background(), "tcp", "localhost:5432"); err == nil || !strings.Contains(err.Error(), "IP address") {
		t.Fatalf("dial by name: %v, want refused (names resolve outside the namespace)", err)
	}
}

func serveEcho(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintln(c, sc.Text())
			}
		}()
	}
}

// pingWithin connects with dial to an echo server at addr (retrying
// while refused) and checks it answers; it returns the last error.
func pingWithin(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), addr string, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		c, err := dial(ctx, "tcp", addr)
		if err == nil {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(d))
			fmt.Fprintln(c, "ping")
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return err
			}
			if line != "ping\n" {
				return fmt.Errorf("answer %q", line)
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPartitionDropsBothWaysAndHeals proves each direction separately
// with datagrams: while b is partitioned, a datagram from a to b and one
// from b to a are sent; after healing, a later datagram on each path
// arrives and the partition-time ones never did (datagrams on one path
// arrive in order, and a dropped one is never resent). TCP connections
// in either direction hang (time out, not refused) while partitioned and
// succeed after healing; a third host is unaffected throughout.
func TestPartitionDropsBothWaysAndHeals(t *testing.T) {
	n := New(t, "a", "b", "c")
	a, b, c := n.Host("a"), n.Host("b"), n.Host("c")
	recvA := startHelper(t, a, "udprecv", a.Address(9000))
	recvB := startHelper(t, b, "udprecv", b.Address(9000))
	await(t, recvA, "listening")
	await(t, recvB, "listening")
	for _, h := range []*Host{a, b} {
		startHelper(t, h, "echo", h.Address(7000))
	}
	// Datagrams leave from a socket of the test process inside the
	// sending host (Host.Dial): on the wire that is the host sending.
	send := func(from, to *Host, msg string) {
		t.Helper()
		c, err := from.Dial(context.Background(), "udp", to.Address(9000))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}

	// Before: both ways work (and each side has learnt the other's MAC,
	// so datagrams sent during the partition leave at once, not queued
	// behind address resolution).
	send(a, b, "a1")
	send(b, a, "b1")
	await(t, recvB, "a1")
	await(t, recvA, "b1")
	mustRunHelper(t, a, "dial", b.Address(7000), "30s")
	mustRunHelper(t, b, "dial", a.Address(7000), "30s")

	if err := b.Partition(); err != nil {
		t.Fatal(err)
	}
	send(a, b, "a2-partitioned")
	send(b, a, "b2-partitioned")
	send(c, a, "c2") // c → a is not b's link: it still flows
	await(t, recvA, "c2")
	for _, d := range [][2]*Host{{a, b}, {b, a}} {
		if out, code := runHelper(t, d[0], "dial", d[1].Address(7000), "1s"); code != helperTimeout {
			t.Fatalf("partitioned: %s → %s: exit %d %q, want a silent drop (timeout)", d[0].Name, d[1].Name, code, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if conn, err := n.Dial(ctx, "tcp", b.Address(7000)); err == nil {
		conn.Close()
		t.Fatal("partitioned: the switch reached b")
	}
	cancel()

	if err := b.Heal(); err != nil {
		t.Fatal(err)
	}
	send(a, b, "a3")
	send(b, a, "b3")
	await(t, recvB, "a3")
	await(t, recvA, "b3")
	if strings.Contains(recvB.Output(), "a2") || strings.Contains(recvA.Output(), "b2") {
		t.Fatalf("datagrams sent during the partition arrived:\nb got %q\na got %q", recvB.Output(), recvA.Output())
	}
	mustRunHelper(t, a, "dial", b.Address(7000), "30s")
	mustRunHelper(t, b, "dial", a.Address(7000), "30s")
}

// TestUnplugAndPlug: with its cable pulled a host reaches nobody and
// nobody reaches it; plugged back, both work again. A partition and a
// pulled cable do not combine (the port coming up would end the
// partition).
func TestUnplugAndPlug(t *testing.T) {
	n := New(t, "a", "b")
	a, b := n.Host("a"), n.Host("b")
	for _, h := range []*Host{a, b} {
		startHelper(t, h, "echo", h.Address(7000))
	}
	mustRunHelper(t, a, "dial", b.Address(7000), "30s")
	if err := b.Unplug(); err != nil {
		t.Fatal(err)
	}
	for _, d := range [][2]*Host{{a, b}, {b, a}} {
		if out, code := runHelper(t, d[0], "dial", d[1].Address(7000), "1s"); code == helperOK {
			t.Fatalf("unplugged: %s → %s connected: %q", d[0].Name, d[1].Name, out)
		}
	}
	if err := b.Partition(); err == nil {
		t.Fatal("Partition of an unplugged host succeeded")
	}
	if err := b.Plug(); err != nil {
		t.Fatal(err)
	}
	mustRunHelper(t, a, "dial", b.Address(7000), "30s")
	mustRunHelper(t, b, "dial", a.Address(7000), "30s")
	if err := b.Partition(); err != nil {
		t.Fatal(err)
	}
	if err := b.Unplug(); err == nil {
		t.Fatal("Unplug of a partitioned host succeeded")
	}
}
