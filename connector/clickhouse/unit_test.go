package clickhouse

// Tests that need no server: parameters, row encoding, the statement
// builder, error classification, routing and state encoding.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/msgid"
)

func noEnv(string) (string, bool) { return "", false }

func TestParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		kind targetKind
		raw  map[string]any
		want []string
	}{
		{targetHosts, map[string]any{"table": "t"}, []string{"parameters.host: required"}},
		{targetHosts, map[string]any{"host": "a:1", "hosts": []any{"b:2"}, "table": "t"}, []string{"give host or hosts, not both"}},
		{targetHosts, map[string]any{"host": "a:1", "table": "t", "shard_hosts": map[string]any{"s": []any{"x"}}}, []string{"use ShardedClickHouseBatchingSink"}},
		{targetHosts, map[string]any{"host": "ftp://a", "table": "t"}, []string{`scheme must be http or https`}},
		{targetHosts, map[string]any{"host": "http://u:p@a:1", "table": "t"}, []string{"credentials do not belong in the host"}},
		{targetHosts, map[string]any{"host": "a", "table": "x`y"}, []string{"not a table name"}},
		{targetHosts, map[string]any{"host": "a", "table": "t", "format": "csv"}, []string{`parameters.format: must be "tab_separated" or "json_each_row"`}},
		{targetHosts, map[string]any{"host": "a", "table": "t", "max_batch_rows": 0}, []string{"max_batch_rows: must be between 1 and"}},
		{targetHosts, map[string]any{"host": "a", "table": "t", "password": int64(12345)}, []string{"password: must be a string (value not shown"}},
		{targetHosts, map[string]any{"host": "a", "table": "t", "password_env": "NOPE"}, []string{"environment variable NOPE is not set"}},
		{targetHosts, map[string]any{"host": "a", "table": "t", "bogus": 1}, []string{"bogus"}},
		{targetShards, map[string]any{"table": "t"}, []string{"shard_hosts: required"}},
		{targetShards, map[string]any{"table": "t", "shard_hosts": map[string]any{"a:b": []any{"h"}}}, []string{"a shard name must be non-empty and contain no ':'"}},
		{targetShards, map[string]any{"table": "t", "host": "h", "shard_hosts": map[string]any{"a": []any{"h"}}}, []string{"takes shard_hosts"}},
	} {
		_, _, err := parseParams("sinks.out.parameters", tc.raw, tc.kind, noEnv)
		if err == nil {
			t.Errorf("%v: no error", tc.raw)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.raw, err, w)
			}
		}
		if strings.Contains(err.Error(), "12345") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	p, shards, err := parseParams("p", map[string]any{"hosts": []any{"a", "https://b:9"}, "table": "t", "password_env": "PW"}, targetHosts,
		func(k string) (string, bool) { return "secret", k == "PW" })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(shards[0].Hosts, ","); got != "http://a:8123,https://b:9" {
		t.Errorf("hosts %s", got)
	}
	if p.password != "secret" || strings.Contains(p.String(), "secret") || strings.Contains(fmt.Sprintf("%#v", *p), "secret") {
		t.Errorf("password resolution or redaction wrong: %s", p)
	}
}

func TestAtMostOnceStrategyRejected(t *testing.T) {
	sp := connector.SinkParams{Path: "s", Parameters: map[string]any{"host": "a", "table": "t"}, AtMostOnce: &connector.AtMostOnceStrategy{Enabled: true}}
	if _, err := NewBatchingSink(sp, Options{}); err == nil || !strings.Contains(err.Error(), "only AtMostOnceClickHouseSink") {
		t.Errorf("batching sink with at_most_once_strategy: %v", err)
	}
	if _, err := NewAtLeastOnceSink(sp, Options{}); err == nil {
		t.Error("at-least-once sink accepted at_most_once_strategy")
	}
	if _, err := NewAtMostOnceSink(sp, Options{}); err == nil || !strings.Contains(err.Error(), "total_queue_bytes_limit") {
		t.Errorf("queue mode without a limit: %v", err)
	}
}

func mustType(t *testing.T, s string) *colType {
	t.Helper()
	ct, err := parseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func TestEncodeValues(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		v      any
		tsv    string
		json   string
		errSub string
	}{
		{typ: "String", v: "a\tb\nc\\d'e\x00", tsv: `a\tb\nc\\d'e\0`, json: `"a\tb\nc\\d'e\u0000"`},
		{typ: "String", v: []byte{0xff, 'x'}, tsv: "\xffx", json: "\"\xffx\""},
		{typ: "Int8", v: int64(-128), tsv: "-128", json: "-128"},
		{typ: "Int8", v: int64(128), errSub: "does not fit Int8"},
		{typ: "Int64", v: int64(-9223372036854775808), tsv: "-9223372036854775808", json: "-9223372036854775808"},
		{typ: "UInt8", v: int64(-1), errSub: "negative"},
		{typ: "UInt64", v: uint64(18446744073709551615), tsv: "18446744073709551615", json: "18446744073709551615"},
		{typ: "UInt32", v: 3.5, errSub: "not an integer"},
		{typ: "Float32", v: 0.1, tsv: "0.1", json: "0.1"},
		{typ: "Float64", v: float64(1e21), tsv: "1e+21", json: "1e+21"},
		{typ: "Nullable(Int32)", v: nil, tsv: `\N`, json: "null"},
		{typ: "Int32", v: nil, errSub: "not Nullable"},
		{typ: "LowCardinality(Nullable(String))", v: "x", tsv: "x", json: `"x"`},
		{typ: "FixedString(2)", v: "abc", errSub: "do not fit FixedString(2)"},
		{typ: "Date", v: "2024-02-29", tsv: "2024-02-29", json: `"2024-02-29"`},
		{typ: "Date", v: int64(1), tsv: "1970-01-02", json: `"1970-01-02"`},
		{typ: "DateTime", v: "2024-13-01 00:00:00", errSub: "not a date-time"},
		{typ: "DateTime('UTC')", v: int64(1700000000), tsv: "1700000000", json: "1700000000"},
		{typ: "Decimal(10, 2)", v: "12.34", tsv: "12.34", json: "12.34"},
		{typ: "Decimal(10, 2)", v: "12,3", errSub: "not a decimal"},
		{typ: "Array(String)", v: []any{"a'b", "c"}, tsv: `['a\'b','c']`, json: `["a'b","c"]`},
		{typ: "Array(Nullable(Int8))", v: []any{int64(1), nil}, tsv: `[1,NULL]`, json: `[1,null]`},
		{typ: "Bool", v: true, tsv: "true", json: "true"},
		{typ: "String", v: int64(1), errSub: "not a string"},
	} {
		ct := mustType(t, tc.typ)
		for _, f := range []string{FormatTabSeparated, FormatJSONEachRow} {
			e := newRowEncoder(f, []column{{name: "c", typ: ct}})
			got, err := e.appendValue(nil, ct, tc.v, false)
			want := tc.tsv
			if f == FormatJSONEachRow {
				want = tc.json
			}
			switch {
			case tc.errSub != "":
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Errorf("%s %v (%s): error %v, want %q", tc.typ, tc.v, f, err, tc.errSub)
				}
			case err != nil:
				t.Errorf("%s %v (%s): %v", tc.typ, tc.v, f, err)
			case string(got) != want:
				t.Errorf("%s %v (%s): %q, want %q", tc.typ, tc.v, f, got, want)
			}
		}
	}
	if _, err := parseType("Map(String, UInt8)"); err == nil || !strings.Contains(err.Error(), "unsupported column type Map(String, UInt8)") {
		t.Errorf("Map: %v", err)
	}
}

// TestEncodeRowsDeterministic: a row encodes to the same bytes however the
// payload map iterates, in the column order, with the message id filled
// in; a column the table lacks is an error naming the message and column.
func TestEncodeRowsDeterministic(t *testing.T) {
	cols := []column{{name: "b", typ: mustType(t, "Int64")}, {name: "a", typ: mustType(t, "String")}, {name: "id", typ: mustType(t, "String"), messageID: true}}
	m := &weir.Message{ID: msgid.Ordered(5, "s", 1), Payload: weir.Row{"a": "x", "b": int64(2)}}
	for _, tc := range []struct{ format, want string }{
		{FormatTabSeparated, "2\tx\t" + string(m.ID) + "\n"},
		{FormatJSONEachRow, `{"b":2,"a":"x","id":"` + string(m.ID) + "\"}\n"},
	} {
		e := newRowEncoder(tc.format, cols)
		for i := 0; i < 20; i++ {
			got, err := e.append(nil, m)
			if err != nil || string(got) != tc.want {
				t.Fatalf("%s: %q, %v; want %q", tc.format, got, err, tc.want)
			}
		}
	}
	e := newRowEncoder(FormatTabSeparated, cols)
	_, err := e.append(nil, &weir.Message{ID: "m1", Payload: weir.Row{"a": "x", "b": int64(1), "zz": 1}})
	var pe *PermanentError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `message m1: column "zz"`) {
		t.Errorf("unknown column: %v", err)
	}
	_, err = e.append(nil, &weir.Message{ID: "m2", Payload: weir.Row{"a": "x", "b": int64(1), "id": "mine"}})
	if err == nil || !strings.Contains(err.Error(), "message_id_column") {
		t.Errorf("row carrying message_id_column: %v", err)
	}
}

func TestInlineSQL(t *testing.T) {
	r := Request{Query: "INSERT INTO `d`.`t` (`a`) FORMAT TabSeparated", Settings: []Setting{{"insert_deduplicate", "1"}, {"insert_deduplication_token", "x'y"}}, Body: []byte("1\n")}
	want := "INSERT INTO `d`.`t` (`a`) SETTINGS insert_deduplicate = '1', insert_deduplication_token = 'x\\'y' FORMAT TabSeparated\n1\n"
	if got := r.InlineSQL(); got != want {
		t.Errorf("InlineSQL = %q, want %q", got, want)
	}
	if got := (Request{Query: "SELECT 1 FORMAT TabSeparated"}).InlineSQL(); got != "SELECT 1 FORMAT TabSeparated" {
		t.Errorf("select: %q", got)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errorClass
	}{
		{&ServerError{Code: 252, HTTPStatus: 500}, classTransient},
		{&ServerError{Code: 60, HTTPStatus: 404}, classPermanent},
		{&ServerError{Code: 48, HTTPStatus: 500}, classUnclassified},
		{&ServerError{HTTPStatus: 503}, classTransient},
		{&ServerError{HTTPStatus: 418}, classUnclassified},
		{ParseServerError("h", "Code: 319. DB::Exception: Unknown status (UNKNOWN_STATUS_OF_INSERT)"), classTransient},
		{ParseServerError("h", "Code: 27, e.displayText() = DB::Exception: Cannot parse input"), classPermanent},
		{fmt.Errorf("post: %w", io.EOF), classTransient},
		{fmt.Errorf("x: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), classTransient},
		{timeoutErr{}, classTransient},
		{context.DeadlineExceeded, classTransient},
		{permanent("bad row"), classPermanent},
		{errors.New("something odd"), classUnclassified},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	for _, e := range ErrorCodes() {
		if e.Name == "" || (e.Class != "transient" && e.Class != "permanent") {
			t.Errorf("table row %+v", e)
		}
	}
}

// TestRendezvous: routing is stable, spreads keys, and adding a shard moves
// only the rows the new shard wins.
func TestRendezvous(t *testing.T) {
	two := &router{names: []string{"a", "b"}, keyCols: []string{"k"}}
	three := &router{names: []string{"a", "b", "c"}, keyCols: []string{"k"}}
	per := map[int]int{}
	for i := 0; i < 3000; i++ {
		m := &weir.Message{ID: "x", Payload: weir.Row{"k": fmt.Sprintf("key%d", i)}}
		s2, err := two.shardOf(m)
		if err != nil {
			t.Fatal(err)
		}
		s3, _ := three.shardOf(m)
		per[s3]++
		if s3 != 2 && s3 != s2 {
			t.Fatalf("key%d moved from %s to %s when c was added", i, two.names[s2], three.names[s3])
		}
	}
	for i := 0; i < 3; i++ {
		if per[i] < 800 || per[i] > 1200 {
			t.Errorf("shard %d got %d of 3000 keys", i, per[i])
		}
	}
	if two.fingerprint() == three.fingerprint() || two.fingerprint() != (&router{names: []string{"a", "b"}, keyCols: []string{"k"}}).fingerprint() {
		t.Error("fingerprints do not tell topologies apart")
	}
}

func TestStateRoundTrip(t *testing.T) {
	st := batchState{Acked: "a1", Fingerprint: "v1:x", Plan: []planEntry{{"b2", 3}, {"c9", 1}}}
	got, err := decodeBatchState(st.encode())
	if err != nil || fmt.Sprint(got) != fmt.Sprint(st) {
		t.Errorf("round trip %v, %v", got, err)
	}
	if _, err := decodeBatchState([]byte{9}); err == nil {
		t.Error("unknown version accepted")
	}
	ss := startedState{Acked: "a", Started: "b"}
	if got, err := decodeStartedState(ss.encode()); err != nil || got != ss {
		t.Errorf("started state %v, %v", got, err)
	}
}

func TestSameTable(t *testing.T) {
	ref := &tableInfo{host: "a", engine: "ReplicatedMergeTree", identity: "zookeeper:/t/1"}
	if err := sameTable(ref, &tableInfo{host: "b", engine: "ReplicatedMergeTree", identity: "zookeeper:/t/1"}, "d", "t"); err != nil {
		t.Errorf("same path: %v", err)
	}
	err := sameTable(ref, &tableInfo{host: "b", engine: "ReplicatedMergeTree", identity: "zookeeper:/t/2"}, "d", "t")
	if err == nil || !strings.Contains(err.Error(), "not the same logical table") {
		t.Errorf("different paths: %v", err)
	}
	rules := targetRules{exactlyOnce: true}
	if _, err := rules.check(&tableInfo{engine: "MergeTree", family: "mergetree"}, "d", "t", 2); err == nil {
		t.Error("a plain MergeTree on two hosts was accepted")
	}
	w, err := rules.check(&tableInfo{engine: "MergeTree", family: "mergetree", dedup: dedupNone}, "d", "t", 1)
	if err != nil || len(w) != 1 {
		t.Errorf("plain single MergeTree: %v %v", w, err)
	}
}
