package kafka

// Parameter decoding: strictness (unknown keys, enums, required keys),
// environment fallbacks, TLS checks, and that secrets never reach an error
// or a formatted value, including a real authentication failure against a
// SASL-enabled kfake.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/spec"
)

const secret = "hunter2-very-secret"

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func sourceFrom(params map[string]any, env map[string]string) (*Source, error) {
	o := Options{Env: envOf(env), Logf: func(string, ...any) {}}
	return NewSource(connector.SourceParams{SourceID: "s", Path: "computations.R.source_streams.s", Parameters: params}, o)
}

func sinkFrom(class string, params map[string]any, env map[string]string, amo *connector.AtMostOnceStrategy) error {
	o := Options{Env: envOf(env)}
	sp := connector.SinkParams{SinkID: "out", Path: "computations.C.sinks.out", Parameters: params, AtMostOnce: amo}
	var err error
	if class == SinkClassName {
		_, err = NewSink(sp, o)
	} else {
		_, err = NewAtLeastOnceSink(sp, o)
	}
	return err
}

// TestParamsStrict: unknown keys, missing required keys and bad values are
// errors naming their spec path.
func TestParamsStrict(t *testing.T) {
	brokers := []any{"localhost:9092"}
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   []string
	}{
		{"unknown key", map[string]any{"brokers": brokers, "topic": "t", "bogus": 1}, []string{"computations.R.source_streams.s.parameters.bogus", "unknown key"}},
		{"misspelled", map[string]any{"brokers": brokers, "topic": "t", "isolation_levle": "read_committed"}, []string{"isolation_levle", "isolation_level"}},
		{"no topic", map[string]any{"brokers": brokers}, []string{"parameters.topic"}},
		{"policy", map[string]any{"brokers": brokers, "topic": "t", "malformed_message_policy": "drop"}, []string{"malformed_message_policy", `"drop"`}},
		{"isolation", map[string]any{"brokers": brokers, "topic": "t", "isolation_level": "dirty"}, []string{"isolation_level"}},
		{"format", map[string]any{"brokers": brokers, "topic": "t", "format": "avro"}, []string{"format", `"avro"`}},
		{"filter", map[string]any{"brokers": brokers, "topic": "t", "partition_filter": []any{3, 1}}, []string{"partition_filter"}},
		{"filter type", map[string]any{"brokers": brokers, "topic": "t", "partition_filter": "0-3"}, []string{"partition_filter"}},
		{"no brokers", map[string]any{"topic": "t"}, []string{"brokers", EnvBrokers}},
		{"tls off", map[string]any{"brokers": brokers, "topic": "t", "tls": map[string]any{"ca_file": "/x"}}, []string{"tls.enabled"}},
		{"tls pair", map[string]any{"brokers": brokers, "topic": "t", "tls": map[string]any{"enabled": true, "cert_file": "/x"}}, []string{"cert_file and key_file"}},
		{"tls ca", map[string]any{"brokers": brokers, "topic": "t", "tls": map[string]any{"enabled": true, "ca_file": "/nonexistent/ca.pem"}}, []string{"tls.ca_file", "/nonexistent/ca.pem"}},
		{"sasl key", map[string]any{"brokers": brokers, "topic": "t", "sasl": map[string]any{"mechanism": "plain", "user": "u"}}, []string{"sasl.user", "unknown key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sourceFrom(tc.params, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	sinkCases := []struct {
		name, class string
		params      map[string]any
		amo         *connector.AtMostOnceStrategy
		want        string
	}{
		{"unknown key", SinkClassName, map[string]any{"brokers": brokers, "topic": "t", "payload": "x"}, nil, "parameters.payload"},
		{"guarantee", SinkClassName, map[string]any{"brokers": brokers, "topic": "t", "delivery_guarantee": "exactly-once"}, nil, "delivery_guarantee"},
		{"no topic", SinkClassName, map[string]any{"brokers": brokers}, nil, "parameters.topic"},
		{"batch", SinkClassName, map[string]any{"brokers": brokers, "topic": "t", "max_messages_per_transaction": -1}, nil, "max_messages_per_transaction"},
		{"at most once", SinkClassName, map[string]any{"brokers": brokers, "topic": "t"}, &connector.AtMostOnceStrategy{Enabled: true}, "at_most_once_strategy"},
		{"sync eo", AtLeastOnceSinkClassName, map[string]any{"brokers": brokers, "topic": "t", "delivery_guarantee": "exactly_once"}, nil, "at-least-once only"},
	}
	for _, tc := range sinkCases {
		t.Run("sink/"+tc.name, func(t *testing.T) {
			err := sinkFrom(tc.class, tc.params, nil, tc.amo)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	// Good parameters build, with defaults.
	p, err := ParseSinkParams("p", map[string]any{"topic": "t"})
	if err != nil {
		t.Fatal(err)
	}
	if p.DeliveryGuarantee != ExactlyOnce || p.messageIDHeader() != "weir-message-id" || p.TransactionalIDPrefix != "weir-" {
		t.Fatalf("defaults %+v", p)
	}
	empty := ""
	p.MessageIDHeader = &empty
	if p.messageIDHeader() != "" {
		t.Fatal("an empty message_id_header does not disable the header")
	}
}

// TestParamsEnv: brokers and credentials fall back to the environment.
func TestParamsEnv(t *testing.T) {
	s, err := sourceFrom(map[string]any{"topic": "t", "sasl": map[string]any{"mechanism": "scram-sha-512"}},
		map[string]string{EnvBrokers: " a:1, b:2 ,", EnvUsername: "u", EnvPassword: secret})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.conn.brokers); got != "[a:1 b:2]" || s.conn.mech == nil || s.conn.mech.Name() != "SCRAM-SHA-512" {
		t.Fatalf("brokers %s, mechanism %v", got, s.conn.mech)
	}
	// username_env / password_env name other variables.
	s, err = sourceFrom(map[string]any{"brokers": []any{"x:1"}, "topic": "t",
		"sasl": map[string]any{"mechanism": "plain", "username_env": "MY_USER", "password_env": "MY_PASS"}},
		map[string]string{"MY_USER": "u", "MY_PASS": secret})
	if err != nil || s.conn.mech.Name() != "PLAIN" {
		t.Fatalf("%v %v", err, s)
	}
}

// TestSecretsNotInErrors: a password never appears in an error or in a
// formatted SASLParams, however the configuration is wrong.
func TestSecretsNotInErrors(t *testing.T) {
	base := func(sasl map[string]any) map[string]any {
		return map[string]any{"brokers": []any{"x:1"}, "topic": "t", "sasl": sasl}
	}
	for _, tc := range []struct {
		name string
		sasl map[string]any
		env  map[string]string
		want string
	}{
		{"bad mechanism", map[string]any{"mechanism": "kerberos", "username": "u", "password": secret}, nil, "mechanism"},
		{"no mechanism", map[string]any{"username": "u", "password": secret}, nil, "mechanism"},
		{"mistyped", map[string]any{"mechanism": "plain", "username": "u", "password": int64(987654321)}, nil, "value is not shown"},
		{"mistyped list", map[string]any{"mechanism": "plain", "username": "u", "password": []any{secret}}, nil, "value is not shown"},
		{"both", map[string]any{"mechanism": "plain", "username": "u", "password": secret, "password_env": "P"}, map[string]string{"P": secret}, "not both"},
		{"env unset", map[string]any{"mechanism": "plain", "username": "u", "password_env": "NOPE"}, nil, "NOPE is not set"},
		{"no user", map[string]any{"mechanism": "plain", "password": secret}, nil, "username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sourceFrom(base(tc.sasl), tc.env)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "987654321") {
				t.Fatalf("error reveals the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if err := sinkFrom(SinkClassName, base(tc.sasl), tc.env, nil); err == nil || strings.Contains(err.Error(), secret) {
				t.Fatalf("sink: %v", err)
			}
		})
	}
	sp := SASLParams{Mechanism: "plain", Username: "u", Password: secret}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, sp); strings.Contains(s, secret) {
			t.Fatalf("%s of SASLParams reveals the password: %s", f, s)
		}
	}
	var p SourceParams
	if err := spec.DecodeParameters("p", base(map[string]any{"mechanism": "plain", "password": secret}), &p); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v"} {
		if s := fmt.Sprintf(f, p); strings.Contains(s, secret) {
			t.Fatalf("%s of SourceParams reveals the password: %s", f, s)
		}
	}
}

// TestSASLAgainstCluster: a SASL-enabled kfake accepts the right password
// (from the environment) and rejects a wrong one with an error that does
// not contain it.
func TestSASLAgainstCluster(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			c := newCluster(t, map[string]int32{"t": 2}, kfake.EnableSASL(), kfake.Superuser(mech, "admin", secret))
			params := func() map[string]any {
				return map[string]any{"brokers": c.ListenAddrs(), "topic": "t",
					"sasl": map[string]any{"mechanism": strings.ToLower(mech), "username": "admin", "password_env": "KAFKA_PW"}}
			}
			s, err := sourceFrom(params(), map[string]string{"KAFKA_PW": secret})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if keys, err := s.Partitions(ctx); err != nil || len(keys) != 2 {
				t.Fatalf("Partitions with the right password: %v, %v", keys, err)
			}
			wrong := "wrong-" + secret
			s, err = sourceFrom(params(), map[string]string{"KAFKA_PW": wrong})
			if err != nil {
				t.Fatal(err)
			}
			ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel2()
			_, err = s.Partitions(ctx2)
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the authentication error reveals the password: %v", err)
			}
			t.Logf("wrong password: %v", err)
		})
	}
}

// TestTLSFiles: a CA file that is not PEM is an error naming it.
func TestTLSFiles(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sourceFrom(map[string]any{"brokers": []any{"x:1"}, "topic": "t", "tls": map[string]any{"enabled": true, "ca_file": ca}}, nil)
	if err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("error %v", err)
	}
	s, err := sourceFrom(map[string]any{"brokers": []any{"x:1"}, "topic": "t", "tls": map[string]any{"enabled": true, "insecure_skip_verify": true}}, nil)
	if err != nil || s.conn.tls == nil || !s.conn.tls.InsecureSkipVerify {
		t.Fatalf("%v %+v", err, s)
	}
}

// TestExampleSpec: examples/kafka/spec.yson parses, validates structurally,
// and its source and sink parameters build (without connecting).
func TestExampleSpec(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "kafka", "spec.yson"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.ParseYSON(data)
	if err != nil {
		t.Fatalf("ParseYSON: %v", err)
	}
	if err := p.Validate(nil); err != nil {
		t.Fatalf("Validate(nil): %v", err)
	}
	r := p.Computations["Reader"]
	src := r.SourceStreams["page_views"]
	if src == nil || src.SourceClassName != SourceClassName {
		t.Fatalf("Reader's source %+v", src)
	}
	if _, err := sourceFrom(src.Parameters, nil); err != nil {
		t.Fatalf("the example's source does not build: %v", err)
	}
	sk := p.Computations["Counter"].Sinks["counts_out"]
	if sk == nil || sk.SinkClassName != SinkClassName {
		t.Fatalf("Counter's sink %+v", sk)
	}
	if err := sinkFrom(SinkClassName, sk.Parameters, nil, nil); err != nil {
		t.Fatalf("the example's sink does not build: %v", err)
	}
}

// TestTLSAgainstCluster: a TLS-only kfake is reachable with tls.enabled and
// its certificate as ca_file, and not without TLS.
func TestTLSAgainstCluster(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, map[string]int32{"t": 3}, kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
	}))
	s, err := sourceFrom(map[string]any{"brokers": c.ListenAddrs(), "topic": "t",
		"tls": map[string]any{"enabled": true, "ca_file": ca}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if keys, err := s.Partitions(ctx); err != nil || len(keys) != 3 {
		t.Fatalf("Partitions over TLS: %v, %v", keys, err)
	}
	plain, err := sourceFrom(map[string]any{"brokers": c.ListenAddrs(), "topic": "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := plain.Partitions(ctx2); err == nil {
		t.Fatal("a plaintext client reached the TLS-only cluster")
	}
}
