package httpsink

// Redirect policy against real servers: max_redirect_count bounds the hops,
// https→http is refused whatever the count, redirects that would drop the
// POST body are refused, and configured headers do not follow a redirect to
// another host. Refusals are permanent failures that keep the message.

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// redirector answers every request with status code to location.
func redirector(code int, location func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", location())
		w.WriteHeader(code)
	})
}

func TestRedirects(t *testing.T) {
	final := &recorder{}
	finalSrv := httptest.NewServer(final)
	defer finalSrv.Close()
	hop1 := httptest.NewServer(redirector(http.StatusTemporaryRedirect, func() string { return finalSrv.URL + "/final" }))
	defer hop1.Close()
	hop2 := httptest.NewServer(redirector(http.StatusPermanentRedirect, func() string { return hop1.URL + "/hop1" }))
	defer hop2.Close()

	deliver := func(t *testing.T, url string, maxRedirects int, o Options) (*driver, error) {
		t.Helper()
		d := startSink(t, fastRetry(map[string]any{"url": url, "payload_column": "body",
			"max_redirect_count": maxRedirects, "headers": map[string]any{"X-Api-Key": "k-secret"}}), o, nil)
		d.send(msg("m01", "payload"))
		deadline := time.Now().Add(10 * time.Second)
		for !d.isAcked("m01") && d.s.Failure() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("neither acked nor failed; status %+v", d.s.Status())
			}
			d.epoch()
			time.Sleep(time.Millisecond)
		}
		return d, d.s.Failure()
	}
	wantRefused := func(t *testing.T, d *driver, err, want error) {
		t.Helper()
		var de *DeliveryError
		if !errors.Is(err, want) || !errors.As(err, &de) || !de.Permanent || de.Attempts != 1 {
			t.Fatalf("Failure() = %v, want a permanent %v after one attempt", err, want)
		}
		if d.isAcked("m01") || d.s.Pending() != 1 {
			t.Errorf("the refused message must stay unacknowledged (pending %d)", d.s.Pending())
		}
	}

	t.Run("count0-refuses-307", func(t *testing.T) {
		before := len(final.requests())
		d, err := deliver(t, hop1.URL, 0, Options{})
		wantRefused(t, d, err, ErrTooManyRedirects)
		if n := len(final.requests()) - before; n != 0 {
			t.Errorf("the redirect target got %d requests, want 0", n)
		}
	})
	t.Run("count1-follows-one-hop", func(t *testing.T) {
		before := len(final.requests())
		d, err := deliver(t, hop1.URL, 1, Options{})
		if err != nil {
			t.Fatalf("Failure() = %v", err)
		}
		d.runUntil(5*time.Second, "the ack", func() bool { return d.isAcked("m01") })
		got := final.requests()[before:]
		if len(got) != 1 || got[0].Body != "payload" || got[0].Key != IdempotencyKey("m01") || got[0].Path != "/final" {
			t.Fatalf("redirect target got %+v, want one POST with the body and key", got)
		}
		// hop1 and finalSrv are different origins (ports): the configured
		// header stays behind.
		if v := got[0].Header.Get("X-Api-Key"); v != "" {
			t.Errorf("X-Api-Key followed the redirect to another origin")
		}
	})
	t.Run("count1-refuses-two-hops", func(t *testing.T) {
		d, err := deliver(t, hop2.URL, 1, Options{})
		wantRefused(t, d, err, ErrTooManyRedirects)
	})
	t.Run("count2-follows-two-hops", func(t *testing.T) {
		d, err := deliver(t, hop2.URL, 2, Options{})
		if err != nil {
			t.Fatalf("Failure() = %v", err)
		}
		d.runUntil(5*time.Second, "the ack", func() bool { return d.isAcked("m01") })
	})
	t.Run("303-refused", func(t *testing.T) {
		see := httptest.NewServer(redirector(http.StatusSeeOther, func() string { return finalSrv.URL }))
		defer see.Close()
		d, err := deliver(t, see.URL, 5, Options{})
		wantRefused(t, d, err, ErrRedirectDropsBody)
	})
	t.Run("https-to-http-refused", func(t *testing.T) {
		before := len(final.requests())
		tlsSrv := httptest.NewTLSServer(redirector(http.StatusTemporaryRedirect, func() string { return finalSrv.URL }))
		defer tlsSrv.Close()
		o := Options{TLSConfig: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig}
		d, err := deliver(t, tlsSrv.URL, 10, o)
		wantRefused(t, d, err, ErrInsecureRedirect)
		if n := len(final.requests()) - before; n != 0 {
			t.Errorf("the http target got %d requests, want 0", n)
		}
	})
	t.Run("https-to-https-followed", func(t *testing.T) {
		tlsFinal := &recorder{}
		tlsFinalSrv := httptest.NewTLSServer(tlsFinal)
		defer tlsFinalSrv.Close()
		// Same certificate pool: httptest servers share one test CA.
		tlsSrv := httptest.NewTLSServer(redirector(http.StatusPermanentRedirect, func() string { return tlsFinalSrv.URL }))
		defer tlsSrv.Close()
		o := Options{TLSConfig: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig}
		d, err := deliver(t, tlsSrv.URL, 1, o)
		if err != nil {
			t.Fatalf("Failure() = %v", err)
		}
		d.runUntil(5*time.Second, "the ack", func() bool { return d.isAcked("m01") })
		if got := tlsFinal.requests(); len(got) != 1 || got[0].Body != "payload" {
			t.Errorf("https target got %+v", got)
		}
	})
	t.Run("tls-without-pool-fails", func(t *testing.T) {
		tlsSrv := httptest.NewUnstartedServer(&recorder{})
		tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the expected handshake failure
		tlsSrv.StartTLS()
		defer tlsSrv.Close()
		d := startSink(t, fastRetry(map[string]any{"url": tlsSrv.URL, "payload_column": "body", "max_attempt_count": 1}), Options{}, nil)
		d.send(msg("m01", "x"))
		if err := d.waitFailure(10 * time.Second); err == nil {
			t.Fatal("an unknown certificate authority was accepted")
		}
	})
}
