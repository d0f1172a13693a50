package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-stream/weir/spec"
)

// Environment variables read as fallbacks for connection settings the spec
// leaves empty. They let a deployment keep brokers and credentials out of
// the spec file.
const (
	// EnvBrokers is a comma-separated broker list used when brokers is empty.
	EnvBrokers = "WEIR_KAFKA_BROKERS"
	// EnvUsername is the SASL user name used when sasl.username and
	// sasl.username_env are empty.
	EnvUsername = "WEIR_KAFKA_USERNAME"
	// EnvPassword is the SASL password used when sasl.password and
	// sasl.password_env are empty.
	EnvPassword = "WEIR_KAFKA_PASSWORD"
)

// ConnParams are the connection settings every Kafka connector takes,
// inline in its parameters.
type ConnParams struct {
	// Brokers are the seed brokers ("host:port"). Empty: EnvBrokers.
	Brokers []string `yson:"brokers"`
	// ClientID is the Kafka client id (default "weir").
	ClientID string `yson:"client_id"`
	// TLS configures TLS; absent or enabled = %false means plaintext.
	TLS *TLSParams `yson:"tls"`
	// SASL configures SASL authentication; absent means none.
	SASL *SASLParams `yson:"sasl"`
}

// TLSParams configure TLS to the brokers.
type TLSParams struct {
	// Enabled turns TLS on (default false: plaintext).
	Enabled bool `yson:"enabled"`
	// CAFile is a PEM file of CA certificates to trust instead of the
	// system roots.
	CAFile string `yson:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS; both or neither.
	CertFile string `yson:"cert_file"`
	KeyFile  string `yson:"key_file"`
	// InsecureSkipVerify disables verification of the brokers'
	// certificates. For tests only.
	InsecureSkipVerify bool `yson:"insecure_skip_verify"`
	// ServerName overrides the name verified in the brokers' certificates.
	ServerName string `yson:"server_name"`
}

// SASLParams configure SASL. The password is a secret: it is never logged
// and never appears in an error, and String redacts it.
type SASLParams struct {
	// Mechanism is plain, scram-sha-256 or scram-sha-512 (required).
	Mechanism string `yson:"mechanism"`
	// Username, else the variable named by UsernameEnv, else EnvUsername.
	Username    string `yson:"username"`
	UsernameEnv string `yson:"username_env"`
	// Password, else the variable named by PasswordEnv, else EnvPassword.
	// Prefer PasswordEnv: a spec file is not a secret store. The field is
	// typed any so that a mistyped value is reported without echoing it.
	Password    any    `yson:"password"`
	PasswordEnv string `yson:"password_env"`
}

// String describes the settings with the password redacted.
func (s SASLParams) String() string {
	pw := "unset"
	if s.Password != nil {
		pw = "<redacted>"
	}
	return fmt.Sprintf("{mechanism:%s username:%q username_env:%q password:%s password_env:%q}",
		s.Mechanism, s.Username, s.UsernameEnv, pw, s.PasswordEnv)
}

// GoString is String, so that %#v does not print the password either.
func (s SASLParams) GoString() string { return s.String() }

// conn is a resolved connection: what a kgo client needs.
type conn struct {
	brokers  []string
	clientID string
	tls      *tls.Config
	mech     sasl.Mechanism
}

// opts returns the kgo options of c.
func (c *conn) opts() []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(c.brokers...), kgo.ClientID(c.clientID)}
	if c.tls != nil {
		o = append(o, kgo.DialTLSConfig(c.tls.Clone()))
	}
	if c.mech != nil {
		o = append(o, kgo.SASL(c.mech))
	}
	return o
}

// resolve checks p and fills what the spec leaves empty from the
// environment. path is the parameters' location in the spec; errors start
// with it and never contain a password.
func (p *ConnParams) resolve(path string, o *Options) (*conn, error) {
	c := &conn{clientID: p.ClientID}
	if c.clientID == "" {
		c.clientID = "weir"
	}
	var errs []error
	for _, b := range p.Brokers {
		if b = strings.TrimSpace(b); b != "" {
			c.brokers = append(c.brokers, b)
		}
	}
	if len(c.brokers) == 0 {
		if v, ok := o.env(EnvBrokers); ok {
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					c.brokers = append(c.brokers, b)
				}
			}
		}
	}
	if len(c.brokers) == 0 {
		errs = append(errs, fmt.Errorf("%s.brokers: no brokers; list them (\"host:port\") or set %s", path, EnvBrokers))
	}
	if t := p.TLS; t != nil {
		cfg, err := t.config(path+".tls", o)
		if err != nil {
			errs = append(errs, err)
		}
		c.tls = cfg
	} else if o.TLSConfig != nil {
		c.tls = o.TLSConfig
	}
	if s := p.SASL; s != nil {
		m, err := s.mechanism(path+".sasl", o)
		if err != nil {
			errs = append(errs, err)
		}
		c.mech = m
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func (t *TLSParams) config(path string, o *Options) (*tls.Config, error) {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify || t.ServerName != "" {
			return nil, fmt.Errorf("%s.enabled: TLS settings are given but enabled is %%false; set enabled = %%true or remove them", path)
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSConfig != nil {
		cfg = o.TLSConfig.Clone()
	}
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || t.InsecureSkipVerify
	if t.ServerName != "" {
		cfg.ServerName = t.ServerName
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", path, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", path, t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, fmt.Errorf("%s: cert_file and key_file go together; give both or neither", path)
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// The error names the files, never their contents.
			return nil, fmt.Errorf("%s.cert_file: load %s and %s: %w", path, t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func (s *SASLParams) mechanism(path string, o *Options) (sasl.Mechanism, error) {
	user := s.Username
	if user == "" && s.UsernameEnv != "" {
		v, ok := o.env(s.UsernameEnv)
		if !ok {
			return nil, fmt.Errorf("%s.username_env: environment variable %s is not set", path, s.UsernameEnv)
		}
		user = v
	}
	if user == "" {
		user, _ = o.env(EnvUsername)
	}
	var pass string
	switch pw := s.Password.(type) {
	case nil:
	case string:
		pass = pw
	default:
		// Never describe the value: it is a secret, even when mistyped.
		return nil, fmt.Errorf("%s.password: expected a string (the value is not shown)", path)
	}
	if pass != "" && s.PasswordEnv != "" {
		return nil, fmt.Errorf("%s: give password or password_env, not both", path)
	}
	if pass == "" && s.PasswordEnv != "" {
		v, ok := o.env(s.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("%s.password_env: environment variable %s is not set", path, s.PasswordEnv)
		}
		pass = v
	}
	if pass == "" {
		pass, _ = o.env(EnvPassword)
	}
	var errs []error
	if user == "" {
		errs = append(errs, fmt.Errorf("%s.username: no user name; set username, username_env or %s", path, EnvUsername))
	}
	if pass == "" {
		errs = append(errs, fmt.Errorf("%s.password: no password; set password_env (or password, or %s)", path, EnvPassword))
	}
	var m sasl.Mechanism
	switch strings.ToLower(s.Mechanism) {
	case "plain":
		m = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "scram-sha-256":
		m = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "scram-sha-512":
		m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	case "":
		errs = append(errs, fmt.Errorf("%s.mechanism: required; one of plain, scram-sha-256, scram-sha-512", path))
	default:
		errs = append(errs, fmt.Errorf("%s.mechanism: unknown mechanism %q; one of plain, scram-sha-256, scram-sha-512", path, s.Mechanism))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Malformed message policies of KafkaSource.
const (
	MalformedFail = "fail"
	MalformedSkip = "skip"
)

// Formats of KafkaSource rows.
const (
	FormatJSON = "json"
	FormatRaw  = "raw"
)

// Isolation levels of KafkaSource.
const (
	ReadCommitted   = "read_committed"
	ReadUncommitted = "read_uncommitted"
)

// Delivery guarantees of KafkaSink.
const (
	ExactlyOnce = "exactly_once"
	AtLeastOnce = "at_least_once"
)

// SourceParams are KafkaSource's parameters (see the package comment).
type SourceParams struct {
	ConnParams
	// Topic is the topic to read (required).
	Topic string `yson:"topic,required"`
	// GroupID, if set, receives the pipeline's committed position of every
	// partition after each epoch commit, for lag tools. The group is never
	// read back: the pipeline's own position lives in its partition state.
	GroupID string `yson:"group_id"`
	// PartitionFilter [begin, end) restricts the partitions read.
	PartitionFilter []int64 `yson:"partition_filter"`
	// UpdatePartitionCountPeriod is how often the source checks the topic's
	// partition count (default 1m; 0 disables) and logs a change. New
	// partitions are read without a restart: the controller re-lists the
	// source's partitions every 10s and starts jobs for new ones.
	UpdatePartitionCountPeriod spec.Duration `yson:"update_partition_count_period"`
	// Finite: each partition ends at its high watermark as of the first
	// read, and the pipeline completes once everything is read.
	Finite bool `yson:"finite"`
	// MalformedMessagePolicy: fail (default) stops the partition with an
	// error naming topic, partition and offset; skip logs and skips.
	MalformedMessagePolicy string `yson:"malformed_message_policy"`
	// IsolationLevel: read_committed (default) or read_uncommitted.
	IsolationLevel string `yson:"isolation_level"`
	// Format: json (default; the value is one JSON object) or raw.
	Format string `yson:"format"`
	// PollTimeout bounds how long one read waits for records (default 100ms).
	PollTimeout spec.Duration `yson:"poll_timeout"`
}

// SetDefaults implements spec.Defaulter.
func (p *SourceParams) SetDefaults() {
	if p.UpdatePartitionCountPeriod == 0 {
		p.UpdatePartitionCountPeriod = spec.Duration(time.Minute)
	}
	if p.MalformedMessagePolicy == "" {
		p.MalformedMessagePolicy = MalformedFail
	}
	if p.IsolationLevel == "" {
		p.IsolationLevel = ReadCommitted
	}
	if p.Format == "" {
		p.Format = FormatJSON
	}
	if p.PollTimeout == 0 {
		p.PollTimeout = spec.Duration(100 * time.Millisecond)
	}
}

// ParseSourceParams decodes and checks KafkaSource's parameters. path is
// their location in the spec ("computations.C.source_streams.S.parameters").
func ParseSourceParams(path string, raw map[string]any) (*SourceParams, error) {
	var p SourceParams
	p.SetDefaults()
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		return nil, err
	}
	var errs []error
	switch p.MalformedMessagePolicy {
	case MalformedFail, MalformedSkip:
	default:
		errs = append(errs, fmt.Errorf("%s.malformed_message_policy: %q is not a policy; use fail or skip", path, p.MalformedMessagePolicy))
	}
	switch p.IsolationLevel {
	case ReadCommitted, ReadUncommitted:
	default:
		errs = append(errs, fmt.Errorf("%s.isolation_level: %q is not an isolation level; use read_committed or read_uncommitted", path, p.IsolationLevel))
	}
	switch p.Format {
	case FormatJSON, FormatRaw:
	default:
		errs = append(errs, fmt.Errorf("%s.format: %q is not a format; use json or raw", path, p.Format))
	}
	if f := p.PartitionFilter; f != nil {
		if len(f) != 2 || f[0] < 0 || f[1] <= f[0] || f[1] > 1<<31-1 {
			errs = append(errs, fmt.Errorf("%s.partition_filter: want [begin; end] with 0 <= begin < end, got %v", path, f))
		}
	}
	if p.UpdatePartitionCountPeriod < 0 {
		errs = append(errs, fmt.Errorf("%s.update_partition_count_period: must not be negative", path))
	}
	if p.PollTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s.poll_timeout: must be positive", path))
	}
	if p.Topic == "" {
		errs = append(errs, fmt.Errorf("%s.topic: must not be empty", path))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// SinkParams are the parameters of KafkaSink and AtLeastOnceKafkaSink.
type SinkParams struct {
	ConnParams
	// Topic is the topic to write (required; it must exist).
	Topic string `yson:"topic,required"`
	// KeyColumn names the column whose value becomes the record key
	// (string or bytes as they are, other scalars formatted as text); the
	// default partitioner hashes it. Empty or a null value: no key.
	KeyColumn string `yson:"key_column"`
	// PayloadColumn names a string or bytes column whose value is the
	// record value (null: a tombstone). Empty (default): the whole row as
	// one JSON object.
	PayloadColumn string `yson:"payload_column"`
	// MessageIDHeader names the record header carrying the hex of the weir
	// message id, stable across retries and restarts (default
	// "weir-message-id"; empty disables).
	MessageIDHeader *string `yson:"message_id_header"`
	// DeliveryGuarantee (KafkaSink only): exactly_once (default) or
	// at_least_once.
	DeliveryGuarantee string `yson:"delivery_guarantee"`
	// TransactionalIDPrefix (KafkaSink, exactly_once) prefixes the
	// persisted producer id to form the transactional id, which is also the
	// progress marker's consumer group (default "weir-").
	TransactionalIDPrefix string `yson:"transactional_id_prefix"`
	// TransactionTimeout (KafkaSink, exactly_once) is the Kafka transaction
	// timeout and bounds one write (default 30s).
	TransactionTimeout spec.Duration `yson:"transaction_timeout"`
	// MaxMessagesPerTransaction (KafkaSink) bounds the messages of one write:
	// one Kafka transaction in exactly_once mode (default 1000).
	MaxMessagesPerTransaction int `yson:"max_messages_per_transaction"`
	// Compression is the codec of the record batches the sink writes:
	// none (default, as Kafka's own producer: every consumer can read it),
	// gzip, snappy, lz4 or zstd. A consumer must support the codec chosen.
	Compression string `yson:"compression"`
	// AllowMissingProgressMarker (KafkaSink, exactly_once) lets a sink whose
	// progress marker is missing or does not match its state start anyway,
	// writing again what may already be in Kafka (at-least-once for those
	// messages). Default %false: the sink stops with an error.
	AllowMissingProgressMarker bool `yson:"allow_missing_progress_marker"`
}

// SetDefaults implements spec.Defaulter.
func (p *SinkParams) SetDefaults() {
	if p.DeliveryGuarantee == "" {
		p.DeliveryGuarantee = ExactlyOnce
	}
	if p.TransactionalIDPrefix == "" {
		p.TransactionalIDPrefix = "weir-"
	}
	if p.TransactionTimeout == 0 {
		p.TransactionTimeout = spec.Duration(30 * time.Second)
	}
	if p.MaxMessagesPerTransaction == 0 {
		p.MaxMessagesPerTransaction = 1000
	}
	if p.Compression == "" {
		p.Compression = "none"
	}
}

// compressionCodecs maps the compression parameter to franz-go's codecs.
var compressionCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// producerOpts are the client options every sink's producer shares: the
// topic, the delivery timeout and the compression codec.
func (p *SinkParams) producerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.DefaultProduceTopic(p.Topic),
		kgo.RecordDeliveryTimeout(p.TransactionTimeout.Std()),
		kgo.ProducerBatchCompression(compressionCodecs[p.Compression]),
	}
}

// messageIDHeader returns the header name, "" if disabled.
func (p *SinkParams) messageIDHeader() string {
	if p.MessageIDHeader == nil {
		return "weir-message-id"
	}
	return *p.MessageIDHeader
}

// ParseSinkParams decodes and checks the sinks' parameters. path is their
// location in the spec ("computations.C.sinks.S.parameters").
func ParseSinkParams(path string, raw map[string]any) (*SinkParams, error) {
	var p SinkParams
	p.SetDefaults()
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		return nil, err
	}
	var errs []error
	switch p.DeliveryGuarantee {
	case ExactlyOnce, AtLeastOnce:
	default:
		errs = append(errs, fmt.Errorf("%s.delivery_guarantee: %q is not a guarantee; use exactly_once or at_least_once", path, p.DeliveryGuarantee))
	}
	if p.Topic == "" {
		errs = append(errs, fmt.Errorf("%s.topic: must not be empty", path))
	}
	if p.TransactionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s.transaction_timeout: must be positive", path))
	}
	if p.MaxMessagesPerTransaction <= 0 {
		errs = append(errs, fmt.Errorf("%s.max_messages_per_transaction: must be positive", path))
	}
	if _, ok := compressionCodecs[p.Compression]; !ok {
		errs = append(errs, fmt.Errorf("%s.compression: %q is not a codec; use none, gzip, snappy, lz4 or zstd", path, p.Compression))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// Options are code-level settings of the connectors, not part of the spec.
type Options struct {
	// Logf receives KafkaSource's log lines (skipped messages, partition
	// count changes); sinks log through their SinkContext. nil: the
	// standard logger. Secrets are never passed to it.
	Logf func(format string, args ...any)
	// TLSConfig, if set, is the base TLS configuration (tests: a fake
	// cluster's certificate pool); tls settings in the spec apply on top.
	// With no tls block in the spec, it enables TLS by itself.
	TLSConfig *tls.Config
	// Env looks up environment variables (nil: os.LookupEnv).
	Env func(name string) (string, bool)
	// ClientOpts are appended to every client's options (tests: a logger,
	// shorter retry backoffs).
	ClientOpts []kgo.Opt
	// Fatal, if set, is called with the error of a sink that stopped for a
	// reason no retry or restart can fix: its progress marker is lost
	// (ErrMarkerLost) and only the operator can decide. The weir command
	// prints the error with what to do and stops the pipeline, rather than
	// restart the job forever. nil: the job fails and is restarted.
	Fatal func(error)
	// ReachabilityPeriod: a source partition whose polls return nothing
	// and whose brokers have not answered for this long asks them for its
	// end offset, and fails its read if they cannot be reached (default
	// 10s; see checkReachable).
	ReachabilityPeriod time.Duration

	// beforeCommit, if set, runs in each data transaction of KafkaSink
	// after its records and progress marker, just before the commit
	// (tests: a stall past the broker's transaction timeout).
	beforeCommit func()
}

func (o *Options) reachabilityPeriod() time.Duration {
	if o.ReachabilityPeriod > 0 {
		return o.ReachabilityPeriod
	}
	return 10 * time.Second
}

func (o *Options) env(name string) (string, bool) {
	if o.Env != nil {
		return o.Env(name)
	}
	return os.LookupEnv(name)
}
