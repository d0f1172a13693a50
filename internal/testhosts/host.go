package testhosts

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
)

// Host is one namespace of a Network: a machine for the processes started
// in it, with one interface (eth0, address Addr) on the network's switch.
type Host struct {
	// Name is the host's name in its network.
	Name string
	// Addr is the host's address on Subnet.
	Addr netip.Addr

	net  *Network
	ns   string // the namespace's name (ip netns)
	port string // the switch-side end of the host's veth pair

	mu          sync.Mutex // serialises the link faults below
	partitioned bool
	unplugged   bool
}

// Namespace is the host's network namespace name, for `ip netns exec` by
// hand while debugging a test.
func (h *Host) Namespace() string { return h.ns }

// Address is "addr:port" of the host, for listen and connect flags.
func (h *Host) Address(port int) string {
	return netip.AddrPortFrom(h.Addr, uint16(port)).String()
}

// PIDs lists the processes inside the host (those whose network namespace
// is the host's, children forked by them included), as `ip netns pids`.
func (h *Host) PIDs() ([]int, error) { return pidsIn(h.ns) }

// Kill crashes the host: it SIGKILLs every process of the host's
// namespace, again and again until none is left (a process may fork while
// it is being killed), then waits until the processes this package started
// there have been reaped and removes the shared memory its killed
// PostgreSQL servers left (as a reboot would). Link faults stay as they
// are; processes may be started in the host again afterwards.
func (h *Host) Kill() error {
	n := h.net
	n.mu.Lock()
	var procs []*Proc
	for _, p := range n.procs {
		if p.Host == h {
			procs = append(procs, p)
		}
	}
	var pgs []*Postgres
	for _, pg := range n.pgs {
		if pg.Host == h {
			pgs = append(pgs, pg)
		}
	}
	n.mu.Unlock()
	// First by their own PIDs: a process just started may still be ip
	// netns exec in the root namespace, not yet inside the host's.
	for _, p := range procs {
		_ = p.cmd.Process.Kill()
	}
	for _, pg := range pgs {
		pg.srv.Kill()
	}
	if err := killAll(h.ns); err != nil {
		return fmt.Errorf("kill host %s: %w", h.Name, err)
	}
	for _, p := range procs {
		<-p.done
	}
	var errs []error
	for _, pg := range pgs {
		if ch := pg.srv.Exited(); ch != nil {
			<-ch
		}
		if err := pg.srv.ReleaseSharedMemory(); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Partition cuts the host off the network without touching its link: its
// bridge port is disabled, so the switch silently drops every frame from
// and to the host (both ways), while the host still sees its link up.
// Connections hang rather than fail. Heal undoes it.
func (h *Host) Partition() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unplugged {
		return fmt.Errorf("partition host %s: it is unplugged", h.Name)
	}
	if err := h.portState(0); err != nil {
		return err
	}
	h.partitioned = true
	return nil
}

// Heal ends a Partition: the host's bridge port forwards again.
func (h *Host) Heal() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.portState(3); err != nil {
		return err
	}
	h.partitioned = false
	return nil
}

// portState sets the host's bridge port to state (0 disabled, 3
// forwarding; the kernel's BR_STATE_*).
func (h *Host) portState(state int) error {
	return run("bridge", "-n", h.net.swNS, "link", "set", "dev", h.port, "state", strconv.Itoa(state))
}

// Unplug pulls the host's cable: the switch-side end of its veth goes
// down, so the host loses its carrier. Plug puts it back.
func (h *Host) Unplug() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.partitioned {
		return fmt.Errorf("unplug host %s: it is partitioned (Heal it first)", h.Name)
	}
	if err := ip("-n", h.net.swNS, "link", "set", h.port, "down"); err != nil {
		return err
	}
	h.unplugged = true
	return nil
}

// Plug ends an Unplug: the switch-side end of the host's veth comes up and
// its bridge port forwards.
func (h *Host) Plug() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := ip("-n", h.net.swNS, "link", "set", h.port, "up"); err != nil {
		return err
	}
	h.unplugged = false
	return nil
}
