package cli

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// The admin API's defences. It listens on loopback only, but a web page the
// operator visits can still reach loopback: a cross-site form or fetch with
// a "simple" content type (text/plain) needs no CORS preflight, and a DNS
// rebinding attack makes a foreign name resolve to 127.0.0.1 so that the
// page is "same-origin" with the API. Hence, for every request:
//
//   - Host must name the API by a loopback address (127.0.0.1, localhost,
//     [::1]) and its port: a rebound name is refused (403);
//   - Origin, when present, must be that same http origin (403 otherwise);
//   - X-Weir-Instance, when present, must be this run's instance id (421):
//     the CLI sends the id it read from DIR/admin.addr, so a stale file whose
//     port another pipeline reuses never delivers a command to it;
//   - Authorization: Bearer <token> must carry the data directory's admin
//     token (401), see adminToken — for every request but the console's
//     page and assets, which hold no data: reads too, since /status, the
//     rows of queues and tables and /metrics carry pipeline data (a last
//     error quotes a row), which any local user could otherwise read;
//   - a request body is at most maxAdminBody bytes (413): a huge POST would
//     otherwise be held in memory whole;
//
// and for every mutating request (any method but GET and HEAD):
//
//   - Content-Type must be application/json or application/x-ndjson (415),
//     which a browser cannot send cross-site without a preflight that this
//     API never answers.
//
// 'weir controller' applies the Host and Origin rules too when it runs
// without a cluster token (clusterAdmin); with one, the token guards it.

const (
	// adminTokenFile holds the admin token of a data directory, created by
	// the first 'weir run' with mode 0600.
	adminTokenFile = "admin.token"
	// AdminTokenEnv, when set, is the admin token: 'weir run' serves with it
	// instead of DIR/admin.token, and the CLI sends it.
	AdminTokenEnv = "WEIR_ADMIN_TOKEN"
	// instanceHeader carries the instance id the client expects to reach.
	instanceHeader = "X-Weir-Instance"
	// maxAdminBody bounds a request body: rows written through the admin
	// API arrive in chunks below it (queueWrite).
	maxAdminBody = 64 << 20
	// minAdminToken is the shortest admin token accepted: a short one can
	// be guessed by a local process trying tokens.
	minAdminToken = 16
)

// adminToken returns the token that guards dir's admin API: $WEIR_ADMIN_TOKEN
// when set, else the content of DIR/admin.token. With create, a missing file
// is created with a fresh random token (mode 0600, exclusive create, so two
// starts cannot write different tokens). A token file that other users can
// read is refused: anyone who reads it can write rows and stop the pipeline.
func adminToken(dir string, create bool) (string, error) {
	if t := strings.TrimSpace(os.Getenv(AdminTokenEnv)); t != "" {
		if len(t) < minAdminToken {
			return "", fmt.Errorf("$%s is %d bytes long; an admin token needs at least %d (a short one can be guessed)", AdminTokenEnv, len(t), minAdminToken)
		}
		return t, nil
	}
	path := filepath.Join(dir, adminTokenFile)
	if create {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			_, werr := f.WriteString(hex.EncodeToString(b[:]) + "\n")
			if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
				return "", fmt.Errorf("write the admin token %s: %w", path, err)
			}
		case !errors.Is(err, fs.ErrExist):
			return "", fmt.Errorf("create the admin token %s: %w", path, err)
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w (set %s, or run the command as the user who started 'weir run')", err, AdminTokenEnv)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the admin token %s is readable by other users (mode %#o); run: chmod 600 %s", path, info.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the admin token: %w (set %s, or run the command as the user who started 'weir run')", err, AdminTokenEnv)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the admin token file %s is empty; delete it and restart 'weir run' to create a new one", path)
	}
	if len(t) < minAdminToken {
		return "", fmt.Errorf("the admin token in %s is %d bytes long; it needs at least %d (a short one can be guessed): delete the file and restart 'weir run' to create a new one", path, len(t), minAdminToken)
	}
	return t, nil
}

// newInstanceID returns a random id for one run of the admin API.
func newInstanceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// adminGuard wraps the admin API's handler with the checks described above.
type adminGuard struct {
	port     string // the listening port
	instance string
	token    string
	next     http.Handler
}

// allowedHost reports whether host (a Host header or an Origin's host) names
// an API listening on port: a loopback name with that port.
func allowedHost(host, port string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != port {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly applies the Host and Origin rules of an API listening on a
// loopback port (the defence against DNS rebinding and cross-site pages);
// it answers and returns false for a request that breaks them.
func loopbackOnly(w http.ResponseWriter, r *http.Request, port string) bool {
	if !allowedHost(r.Host, port) {
		http.Error(w, fmt.Sprintf("refused: Host %q is not this admin API (want 127.0.0.1:%s or localhost:%s); "+
			"the admin API answers only requests addressed to it by a loopback name", r.Host, port, port), http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		host, ok := strings.CutPrefix(o, "http://")
		if !ok || !allowedHost(host, port) {
			http.Error(w, fmt.Sprintf("refused: Origin %q is not this admin API; cross-site requests are not accepted", o), http.StatusForbidden)
			return false
		}
	}
	return true
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackOnly(w, r, g.port) {
		return
	}
	if id := r.Header.Get(instanceHeader); id != "" && id != g.instance {
		http.Error(w, fmt.Sprintf("refused: this admin API is instance %s, not %s: the admin.addr you read is stale "+
			"(its weir is gone and another one reuses the port)", g.instance, id), http.StatusMisdirectedRequest)
		return
	}
	if isConsoleAsset(r) {
		g.next.ServeHTTP(w, r) // the page holds no data; it asks for the token
		return
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth)), []byte(g.token)) != 1 {
		http.Error(w, "refused: the admin API needs the admin token: send 'Authorization: Bearer <token>' "+
			"with the token of DIR/"+adminTokenFile+" (or $"+AdminTokenEnv+"); the weir CLI does this itself, "+
			"and 'weir pipeline console --data DIR' prints a console link that carries it", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > maxAdminBody {
		http.Error(w, fmt.Sprintf("refused: a request body of %d bytes; the admin API takes at most %d (64 MiB) per request", r.ContentLength, maxAdminBody), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" && mt != "application/x-ndjson" {
			http.Error(w, fmt.Sprintf("refused: Content-Type %q; send application/json (or application/x-ndjson for rows)", r.Header.Get("Content-Type")),
				http.StatusUnsupportedMediaType)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// guarded adds the web console to h (the admin API's routes) and wraps
// both with the admin guard, using the data directory's token (created if
// missing).
func (r *runner) guarded(h http.Handler) (http.Handler, error) {
	token, err := adminToken(r.dir, true)
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(r.addr)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	r.console = runConsole(r)
	r.console.routes(mux)
	return &adminGuard{port: port, instance: r.instance, token: token, next: mux}, nil
}
