package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"

	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/wire"
)

// TestClusterAdminNeedsToken: the controller's admin API refuses a request
// without the cluster token or with a wrong one, and serves it with the
// right one (a standby says so).
func TestClusterAdminNeedsToken(t *testing.T) {
	st, err := pstore.Open(t.TempDir(), pstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := &clusterAdmin{sec: wire.Security{Token: "s3cret"}, st: st}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"s3cret", http.StatusUnauthorized},
		{"Bearer s3cret", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/status", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, rec.Code, tc.want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/drain?worker=w1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("drain on a standby: %d", rec.Code)
	}
	// Without a token configured (loopback) a drain is refused: a web
	// page could send that POST.
	open := &clusterAdmin{st: st}
	rec = httptest.NewRecorder()
	open.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/drain?worker=w1", nil))
	if rec.Code != http.StatusForbidden {
		t.Errorf("drain without a configured token: %d, want 403", rec.Code)
	}
}
