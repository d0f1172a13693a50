package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DIR/admin.addr names the admin API of the weir running on DIR:
//
//	127.0.0.1:PORT        first line: the address
//	instance <hex id>     second line: the id of that run
//
// The id lets a client tell the weir that wrote the file from another
// process that reuses the port after the writer was killed: every CLI
// request carries it (X-Weir-Instance) and the API refuses a foreign id.

// writeAdminAddr publishes addr and instance in DIR/admin.addr atomically.
func writeAdminAddr(dir, addr, instance string) error {
	tmp := filepath.Join(dir, adminAddrFile+".tmp")
	if err := os.WriteFile(tmp, []byte(addr+"\ninstance "+instance+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, adminAddrFile))
}

// adminConn is a client of the admin API of the weir running on a data
// directory.
type adminConn struct {
	dir, addr, instance string
	token               string // read once, at the first request
}

// runningAdmin returns a client of the admin API of the weir running on
// dir, if DIR/admin.addr names one that answers as the instance it names.
func runningAdmin(dir string) (*adminConn, bool) {
	b, err := os.ReadFile(filepath.Join(dir, adminAddrFile))
	if err != nil {
		return nil, false
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	c := &adminConn{dir: dir, addr: strings.TrimSpace(lines[0])}
	if len(lines) > 1 {
		c.instance, _ = strings.CutPrefix(strings.TrimSpace(lines[1]), "instance ")
	}
	if c.instance == "" {
		return nil, false // written by an older weir: cannot be verified
	}
	// The probe carries no token: the guard checks the instance id first
	// (421 for another instance), so a 401 is this instance asking for the
	// token, which the command's own request then sends (or says why it
	// cannot).
	req, err := http.NewRequest(http.MethodGet, "http://"+c.addr+"/status", nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set(instanceHeader, c.instance)
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, false
	}
	resp.Body.Close()
	return c, resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// request builds a request to the API with the instance id and, for a
// mutating method, the admin token and contentType (default
// application/json).
func (c *adminConn) request(method, path, contentType string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, "http://"+c.addr+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(instanceHeader, c.instance)
	if c.token == "" {
		if c.token, err = adminToken(c.dir, false); err != nil {
			return nil, err
		}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if method != http.MethodGet && method != http.MethodHead {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	return req, nil
}

// call calls the API and copies the response body to out; a non-2xx
// answer is an error with the body's text.
func (c *adminConn) call(method, path, contentType string, body io.Reader, out io.Writer) error {
	req, err := c.request(method, path, contentType, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API of the running weir at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return errors.New(strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(out, resp.Body)
	return err
}
