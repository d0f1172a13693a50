package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ServerError is an answer of ClickHouse that is not a success: an
// exception with its code, or an HTTP status without one (a proxy's 502).
type ServerError struct {
	// Code is ClickHouse's error code, 0 if the answer carried none.
	Code int
	// HTTPStatus is the HTTP status (0 for a transport that has none, chDB).
	HTTPStatus int
	// Message is the start of the server's text (never the request).
	Message string
	// Host is the endpoint that answered.
	Host string
}

func (e *ServerError) Error() string {
	name := CodeName(e.Code)
	switch {
	case e.Code != 0 && e.HTTPStatus != 0:
		return fmt.Sprintf("%s: ClickHouse error %d %s (HTTP %d): %s", e.Host, e.Code, name, e.HTTPStatus, e.Message)
	case e.Code != 0:
		return fmt.Sprintf("%s: ClickHouse error %d %s: %s", e.Host, e.Code, name, e.Message)
	}
	return fmt.Sprintf("%s: HTTP %d: %s", e.Host, e.HTTPStatus, e.Message)
}

// errorClass says what retrying an INSERT that failed this way can do.
type errorClass int

const (
	// classTransient: the server or the path to it is temporarily unable
	// (or the outcome is unknown); the same request is retried without
	// limit. For an exactly-once batch the retry carries the same bytes and
	// token, so a request that did apply is deduplicated.
	classTransient errorClass = iota
	// classPermanent: the same request will fail the same way (bad data,
	// missing table, wrong credentials); it fails at once.
	classPermanent
	// classUnclassified: anything else; retried until max_insert_attempts
	// attempts in total.
	classUnclassified
)

func (c errorClass) String() string {
	switch c {
	case classTransient:
		return "transient"
	case classPermanent:
		return "permanent"
	}
	return "unclassified"
}

// codeClass is the classification table of ClickHouse error codes (the
// package comment reproduces it). Names are ClickHouse's; the chDB tests
// check each name against the server's system.errors.
var codeClass = map[int]struct {
	name  string
	class errorClass
}{
	// Transient: overload, replication and coordination trouble, timeouts,
	// a body cut short on the way (the retry resends it whole).
	32:  {"ATTEMPT_TO_READ_AFTER_EOF", classTransient},
	33:  {"CANNOT_READ_ALL_DATA", classTransient},
	159: {"TIMEOUT_EXCEEDED", classTransient},
	202: {"TOO_MANY_SIMULTANEOUS_QUERIES", classTransient},
	203: {"NO_FREE_CONNECTION", classTransient},
	209: {"SOCKET_TIMEOUT", classTransient},
	210: {"NETWORK_ERROR", classTransient},
	225: {"NO_ZOOKEEPER", classTransient},
	236: {"ABORTED", classTransient},
	241: {"MEMORY_LIMIT_EXCEEDED", classTransient},
	242: {"TABLE_IS_READ_ONLY", classTransient},
	252: {"TOO_MANY_PARTS", classTransient},
	279: {"ALL_CONNECTION_TRIES_FAILED", classTransient},
	285: {"TOO_FEW_LIVE_REPLICAS", classTransient},
	286: {"UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE", classTransient},
	319: {"UNKNOWN_STATUS_OF_INSERT", classTransient},
	373: {"SESSION_IS_LOCKED", classTransient},
	394: {"QUERY_WAS_CANCELLED", classTransient},
	425: {"SYSTEM_ERROR", classTransient},
	439: {"CANNOT_SCHEDULE_TASK", classTransient},
	999: {"KEEPER_EXCEPTION", classTransient},

	// Permanent: the request itself is wrong for this server and table.
	6:   {"CANNOT_PARSE_TEXT", classPermanent},
	8:   {"THERE_IS_NO_COLUMN", classPermanent},
	10:  {"NOT_FOUND_COLUMN_IN_BLOCK", classPermanent},
	16:  {"NO_SUCH_COLUMN_IN_TABLE", classPermanent},
	20:  {"NUMBER_OF_COLUMNS_DOESNT_MATCH", classPermanent},
	26:  {"CANNOT_PARSE_QUOTED_STRING", classPermanent},
	27:  {"CANNOT_PARSE_INPUT_ASSERTION_FAILED", classPermanent},
	38:  {"CANNOT_PARSE_DATE", classPermanent},
	41:  {"CANNOT_PARSE_DATETIME", classPermanent},
	44:  {"ILLEGAL_COLUMN", classPermanent},
	47:  {"UNKNOWN_IDENTIFIER", classPermanent},
	53:  {"TYPE_MISMATCH", classPermanent},
	60:  {"UNKNOWN_TABLE", classPermanent},
	62:  {"SYNTAX_ERROR", classPermanent},
	69:  {"ARGUMENT_OUT_OF_BOUND", classPermanent},
	70:  {"CANNOT_CONVERT_TYPE", classPermanent},
	72:  {"CANNOT_PARSE_NUMBER", classPermanent},
	81:  {"UNKNOWN_DATABASE", classPermanent},
	115: {"UNKNOWN_SETTING", classPermanent},
	117: {"INCORRECT_DATA", classPermanent},
	131: {"TOO_LARGE_STRING_SIZE", classPermanent},
	164: {"READONLY", classPermanent},
	192: {"UNKNOWN_USER", classPermanent},
	193: {"WRONG_PASSWORD", classPermanent},
	194: {"REQUIRED_PASSWORD", classPermanent},
	349: {"CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN", classPermanent},
	497: {"ACCESS_DENIED", classPermanent},
	516: {"AUTHENTICATION_FAILED", classPermanent},
}

// CodeName returns ClickHouse's name of an error code the sink classifies,
// or "" for other codes.
func CodeName(code int) string { return codeClass[code].name }

// classify says how an INSERT failure is retried. Transport failures
// (refused, reset, EOF, timeouts) are transient: for a request that was
// sent they leave the outcome unknown, and only a retry of the same
// request settles it.
func classify(err error) errorClass {
	var se *ServerError
	if errors.As(err, &se) {
		if se.Code != 0 {
			if c, ok := codeClass[se.Code]; ok {
				return c.class
			}
			return classUnclassified
		}
		switch se.HTTPStatus {
		case 408, 429, 502, 503, 504:
			return classTransient
		}
		return classUnclassified
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return classPermanent
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) {
		return classTransient
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return classTransient
	}
	msg := err.Error()
	for _, s := range []string{"EOF", "connection reset", "broken pipe", "connection refused", "server closed"} {
		if strings.Contains(msg, s) {
			return classTransient
		}
	}
	return classUnclassified
}

// failureLabel is the code label of the failure metric: the ClickHouse
// code, "http_<status>", or "transport".
func failureLabel(err error) string {
	var se *ServerError
	if errors.As(err, &se) {
		if se.Code != 0 {
			return strconv.Itoa(se.Code)
		}
		return "http_" + strconv.Itoa(se.HTTPStatus)
	}
	return "transport"
}

// PermanentError is a failure the sink detects itself that no retry can
// fix: a row that does not fit the table, a rejected table. It stops the
// sink instance with an error naming the message and column.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

func permanent(format string, args ...any) error {
	return &PermanentError{Err: fmt.Errorf(format, args...)}
}

// exceptionCode finds ClickHouse's code in an exception text: "Code: 60,
// e.displayText() = …" (18.x) or "Code: 60. DB::Exception: …" (later).
var exceptionCode = regexp.MustCompile(`Code: (\d+)[.,]`)

func parseExceptionCode(text string) int {
	m := exceptionCode.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// messageLimit bounds the server text kept in a ServerError.
const messageLimit = 512

func trimMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > messageLimit {
		s = s[:messageLimit] + "…"
	}
	return s
}

// ParseServerError builds the *ServerError of an exception text that a
// transport without HTTP received (the chDB test transport): the code is
// read from the text.
func ParseServerError(host, text string) *ServerError {
	return &ServerError{Code: parseExceptionCode(text), Message: trimMessage(text), Host: host}
}

// ErrorCode is one row of the classification table.
type ErrorCode struct {
	Code  int
	Name  string
	Class string // transient or permanent
}

// ErrorCodes returns the classification table, sorted by code. Codes not
// in it are unclassified.
func ErrorCodes() []ErrorCode {
	out := make([]ErrorCode, 0, len(codeClass))
	for code, c := range codeClass {
		out = append(out, ErrorCode{Code: code, Name: c.name, Class: c.class.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}
