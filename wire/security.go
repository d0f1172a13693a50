package wire

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TokenEnv names the environment variable that may hold the shared token.
const TokenEnv = "WEIR_CLUSTER_TOKEN"

// tokenKey is the metadata key carrying the token.
const tokenKey = "weir-token"

// Security is how a process authenticates its peers: a shared token and,
// optionally, TLS. The zero value is plain, unauthenticated gRPC — allowed
// only on loopback (CheckListen).
type Security struct {
	// Token is the shared secret every call must carry ("" = none).
	Token string
	// CertFile and KeyFile: this process's TLS certificate (servers; also
	// presented as a client certificate when set).
	CertFile, KeyFile string
	// CAFile: the CA that signed the peers' certificates (clients verify
	// servers with it; with ClientCerts servers verify clients too).
	CAFile string
	// ServerName overrides the name clients verify (default: the host of
	// the address dialed).
	ServerName string
	// ClientCerts makes servers require client certificates signed by CAFile.
	ClientCerts bool
}

// String never shows the token.
func (s Security) String() string {
	return fmt.Sprintf("token set: %v, tls: %v", s.Token != "", s.TLS())
}

// TLS reports whether TLS is configured.
func (s Security) TLS() bool { return s.CertFile != "" || s.CAFile != "" }

// LoadToken returns the token of file (if not ""), else of the environment
// variable TokenEnv, else "". A file others can read is refused.
func LoadToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(TokenEnv)), nil
	}
	info, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s is readable by other users (mode %v): chmod 600 it", file, info.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return t, nil
}

// IsLoopback reports whether addr (host:port) listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses to listen on addr beyond loopback without a token.
func (s Security) CheckListen(addr string) error {
	if s.Token == "" && !IsLoopback(addr) {
		return fmt.Errorf("%s listens beyond loopback: a shared token is required (--token-file FILE or $%s)", addr, TokenEnv)
	}
	return nil
}

// serverKeepalive is how the servers find a client gone silent: a ping
// after serverKeepalive.Time without traffic from it, and the connection
// closed (every stream on it ended, each handler returning) when the ping
// is not answered within Timeout. Without it (gRPC's default is a ping
// after two hours) a server never learns of a client that vanished in a
// partition, and a handler of the client's stream — a transport push
// stream waiting for room in a full mailbox — lives on.
var serverKeepalive = keepalive.ServerParameters{Time: 2 * time.Second, Timeout: 2 * time.Second}

// ServerOptions returns the gRPC server options: the codec, keepalive
// (serverKeepalive; clients may ping every second), TLS if configured, and
// the token check on every call.
func (s Security) ServerOptions() ([]grpc.ServerOption, error) {
	opts := []grpc.ServerOption{grpc.ForceServerCodec(Codec{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(serverKeepalive)}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if s.ClientCerts {
			pool, err := loadPool(s.CAFile)
			if err != nil {
				return nil, err
			}
			cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	if s.Token != "" {
		check := s.checkToken
		opts = append(opts,
			grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if err := check(ctx); err != nil {
					return nil, err
				}
				return h(ctx, req)
			}),
			grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if err := check(ss.Context()); err != nil {
					return err
				}
				return h(srv, ss)
			}))
	}
	return opts, nil
}

// CheckToken compares a presented token with the shared one in constant
// time ("" shared: anything passes).
func (s Security) CheckToken(presented string) bool {
	if s.Token == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(s.Token)) == 1
}

func (s Security) checkToken(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	var got string
	if v := md.Get(tokenKey); len(v) == 1 {
		got = v[0]
	}
	if got == "" || !s.CheckToken(got) {
		return status.Error(codes.Unauthenticated, "weir: missing or wrong cluster token")
	}
	return nil
}

// DialOptions returns the gRPC client options: the codec, TLS if
// configured, and the token on every call.
func (s Security) DialOptions() ([]grpc.DialOption, error) {
	// Keepalives find a connection whose peer went silent (a partitioned
	// host) within seconds, so that calls fail and reconnect instead of
	// waiting for TCP's retransmission timeout. gRPC raises a client's
	// ping interval to at least 10 s, so a client finds the silence after
	// 10 to 12 s (a server, with serverKeepalive, after 4 to 6 s).
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.ForceCodec(Codec{})),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 2 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true})}
	if s.TLS() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
		if s.CAFile != "" {
			pool, err := loadPool(s.CAFile)
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = pool
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if s.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds{token: s.Token, secure: s.TLS()}))
	}
	return opts, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, errors.New("tls: client certificates need a CA file (--tls-ca)")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: no certificate in %s", file)
	}
	return pool, nil
}

// tokenCreds puts the token in every call's metadata.
type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{tokenKey: t.token}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }

// Dial connects to addr (connections are lazy: gRPC reconnects with
// backoff by itself).
func (s Security) Dial(addr string) (*grpc.ClientConn, error) {
	opts, err := s.DialOptions()
	if err != nil {
		return nil, err
	}
	return grpc.NewClient("passthrough:///"+addr, opts...)
}
