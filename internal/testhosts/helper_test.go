package testhosts

// The test binary doubles as the programs the kit's tests run inside
// hosts (WEIR_TESTHOSTS_HELPER=1, the mode in the arguments): small
// network tools, so the tests need nothing but the binary itself.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TESTHOSTS_HELPER") == "1" {
		os.Exit(helper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// Exit codes of the helper.
const (
	helperOK      = 0
	helperFailed  = 1
	helperTimeout = 3
)

func helper(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "helper: want MODE ADDR ...")
		return helperFailed
	}
	var err error
	switch mode, addr := args[0], args[1]; mode {
	case "echo": // echo ADDR: a TCP server echoing each line back
		err = echoServer(addr)
	case "dial": // dial ADDR TIMEOUT: connect, send a line, print the echo
		var d time.Duration
		if d, err = time.ParseDuration(args[2]); err == nil {
			err = dialOnce(addr, d)
		}
	case "udprecv": // udprecv ADDR: print every datagram received, one a line
		err = udpReceive(addr)
	case "sql": // sql URL STATEMENT...: run each, print rows' columns
		err = runSQL(addr, args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		fmt.Println("timeout")
		return helperTimeout
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return helperFailed
	}
	return helperOK
}

func echoServer(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening")
	serveEcho(l)
	return errors.New("echo: listener closed")
}

// dialOnce connects to addr within d — retrying while the connection is
// refused (the server may not be listening yet), never past d — then
// sends "ping" and prints the server's answer.
func dialOnce(addr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var c net.Conn
	for {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	fmt.Print("echo: " + line)
	return nil
}

func udpReceive(addr string) error {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening")
	buf := make([]byte, 1500)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		fmt.Println(string(buf[:n]))
	}
}

func runSQL(url string, stmts []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		rows, err := c.Query(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			var cols []string
			for _, v := range vals {
				cols = append(cols, fmt.Sprint(v))
			}
			fmt.Println(strings.Join(cols, ","))
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// startHelper runs the test binary in helper mode inside h.
func startHelper(t *testing.T, h *Host, args ...string) *Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Start(Cmd{Name: args[0], Path: exe, Args: args, Env: []string{"WEIR_TESTHOSTS_HELPER=1"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runHelper runs the test binary in helper mode inside h to its end and
// returns its stdout and exit code.
func runHelper(t *testing.T, h *Host, args ...string) (string, int) {
	t.Helper()
	p := startHelper(t, h, args...)
	err := p.Wait()
	code := 0
	if err != nil {
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) || ee.ExitCode() < 0 {
			t.Fatalf("helper %v in %s: %v\n%s", args, h.Name, err, p.Tail())
		}
		code = ee.ExitCode()
	}
	return p.Output(), code
}

// mustRunHelper is runHelper that fails t unless the helper succeeds.
func mustRunHelper(t *testing.T, h *Host, args ...string) string {
	t.Helper()
	p := startHelper(t, h, args...)
	if err := p.Wait(); err != nil {
		t.Fatalf("helper %v in %s: %v\n%s", args, h.Name, err, p.Tail())
	}
	return p.Output()
}

// await waits up to a minute for p to print s.
func await(t *testing.T, p *Proc, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.AwaitOutput(ctx, s); err != nil {
		t.Fatal(err)
	}
}
