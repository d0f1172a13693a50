package testhosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pidsIn lists the processes whose network namespace is ns, as `ip netns
// pids` does (the namespace file's device and inode against each
// /proc/PID/ns/net), never this process itself (whose threads enter
// namespaces briefly in inNetns).
func pidsIn(ns string) ([]int, error) {
	var want syscall.Stat_t
	if err := syscall.Stat(netnsPath(ns), &want); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		// Fails for processes that exited meanwhile and for zombies
		// (which have no namespaces left): neither is a process to kill.
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil {
			continue
		}
		if st.Dev == want.Dev && st.Ino == want.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killAll SIGKILLs every process of namespace ns until none is left. A
// process that forks while being killed is caught on the next round.
func killAll(ns string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids, err := pidsIn(ns)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s: processes %v survive SIGKILL for 30s", ns, pids)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d in %s: %w", pid, ns, err)
			}
		}
		// Signals are delivered asynchronously: give the killed a moment
		// to leave before listing again.
		time.Sleep(5 * time.Millisecond)
	}
}

// inNetns runs f on an OS thread moved into namespace ns, so sockets f
// creates belong to ns (a socket keeps its namespace for life, whatever
// thread later uses it). The thread moves back before it serves other
// goroutines; if it cannot, it stays locked and the runtime ends it with
// the goroutine. f must not start goroutines that create sockets.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(netnsPath(ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", ns, err))
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// dialIn connects from namespace ns to addr, an IP literal with port (a
// name would be resolved on other threads, outside ns).
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("dial %s: want an IP address and port: %w", addr, err)
	}
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenIn listens in namespace ns on addr, an IP literal with port.
func listenIn(ns, network, addr string) (net.Listener, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return nil, fmt.Errorf("listen %s: want an IP address and port: %w", addr, err)
	}
	var l net.Listener
	err := inNetns(ns, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Dial connects from inside the host to addr ("ip:port"; no names), e.g.
// to another host's server, as a process in the host would.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, h.ns, network, addr)
}

// Listen listens inside the host on addr ("ip:port", e.g. h.Address(0)),
// for a server the test process runs on the host.
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	return listenIn(h.ns, network, addr)
}

// Dial connects from the switch (source ObserverAddr) to addr ("ip:port";
// no names): the test process reaching a host's server over the network,
// e.g. a worker's admin API, or PostgreSQL with pgx's DialFunc. A
// partitioned or unplugged host is out of its reach too.
func (n *Network) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialIn(ctx, n.swNS, network, addr)
}

// Listen listens on the switch at addr (ObserverAddr and a port, e.g.
// "10.251.0.1:0"): a server run by the test process that every host
// reaches, e.g. an HTTP sink.
func (n *Network) Listen(network, addr string) (net.Listener, error) {
	return listenIn(n.swNS, network, addr)
}
