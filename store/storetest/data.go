package storetest

import (
	"fmt"
	"testing"

	"github.com/weir-stream/weir/store"
)

// testTables: tables are independent namespaces. The same key in two tables
// holds two values; deleting or range-deleting in one leaves the others;
// scanning a table never returns another table's rows, not even those of a
// table whose name extends it ("t" vs "t0", "t_b", "tx"), and binary keys
// (0x00, 0x01, 0xff bytes) stay inside their table in bytewise order.
func testTables(t *testing.T, h Harness) {
	s, _ := open(t, h)
	tables := []store.Table{tA, tB, tAx, tA0}
	for _, tb := range tables {
		put(t, s, tb, "k", "v-"+string(tb))
		put(t, s, tb, "k2", "w-"+string(tb))
	}
	for _, tb := range tables {
		wantGet(t, s, tb, "k", "v-"+string(tb))
	}
	binKeys := []string{"\x00", "\x00\x00", "\x01", "\xff", "\xff\xff", "k\x00", "k\xff"}
	for _, k := range binKeys {
		put(t, s, tA, k, "bin")
	}
	want := []kv{
		{"\x00", "bin"}, {"\x00\x00", "bin"}, {"\x01", "bin"},
		{"k", "v-t"}, {"k\x00", "bin"}, {"k2", "w-t"}, {"k\xff", "bin"},
		{"\xff", "bin"}, {"\xff\xff", "bin"},
	}
	wantTable(t, s, tA, want)
	for _, tb := range tables[1:] {
		wantTable(t, s, tb, []kv{{"k", "v-" + string(tb)}, {"k2", "w-" + string(tb)}})
	}

	txn := store.NewTxn()
	txn.Delete(tB, []byte("k"))
	commit(t, s, txn)
	wantAbsent(t, s, tB, "k")
	wantGet(t, s, tA, "k", "v-t")
	wantGet(t, s, tAx, "k", "v-tx")

	// A whole-table range deletion of "t" must not touch "t0", "t_b", "tx".
	txn = store.NewTxn()
	txn.DeleteRange(tA, nil, nil)
	commit(t, s, txn)
	wantTable(t, s, tA, nil)
	wantTable(t, s, tB, []kv{{"k2", "w-t_b"}})
	wantTable(t, s, tAx, []kv{{"k", "v-tx"}, {"k2", "w-tx"}})
	wantTable(t, s, tA0, []kv{{"k", "v-t0"}, {"k2", "w-t0"}})
}

// testGetPutDelete: point reads and writes, empty values, deleting a missing
// key, and that Get's result is owned by the caller.
func testGetPutDelete(t *testing.T, h Harness) {
	s, _ := open(t, h)
	wantAbsent(t, s, tMain, "a")
	put(t, s, tMain, "a", "1")
	wantGet(t, s, tMain, "a", "1")
	put(t, s, tMain, "a", "2")
	wantGet(t, s, tMain, "a", "2")

	// An empty value is a present row, distinct from an absent one.
	put(t, s, tMain, "empty", "")
	v, ok, err := s.Get(t.Context(), tMain, []byte("empty"))
	if err != nil || !ok || len(v) != 0 {
		t.Errorf("Get(empty value) = %q, %v, %v; want \"\", true, nil", v, ok, err)
	}

	// Deleting a missing key is not an error.
	txn := store.NewTxn()
	txn.Delete(tMain, []byte("missing"))
	commit(t, s, txn)

	txn = store.NewTxn()
	txn.Delete(tMain, []byte("a"))
	commit(t, s, txn)
	wantAbsent(t, s, tMain, "a")
	wantTable(t, s, tMain, []kv{{"empty", ""}})

	// The returned slice is the caller's: scribbling on it changes nothing.
	put(t, s, tMain, "own", "value")
	v, _, err = s.Get(t.Context(), tMain, []byte("own"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		v[i] = 'X'
	}
	wantGet(t, s, tMain, "own", "value")

	// The caller may reuse its key buffer after Get returns.
	key := []byte("own")
	if _, _, err := s.Get(t.Context(), tMain, key); err != nil {
		t.Fatal(err)
	}
	copy(key, "xyz")
	wantGet(t, s, tMain, "own", "value")

	if _, _, err := s.Get(t.Context(), "Bad-Table", []byte("k")); err == nil {
		t.Error("Get with an invalid table name succeeded")
	}
}

func keyN(i int) string   { return fmt.Sprintf("k%02d", i) }
func valueN(i int) string { return fmt.Sprintf("v%02d", i) }

// rowsN returns rows keyN(i)=valueN(i) for i in [lo, hi), or in reverse.
func rowsN(lo, hi int, reverse bool) []kv {
	var rows []kv
	for i := lo; i < hi; i++ {
		rows = append(rows, kv{keyN(i), valueN(i)})
	}
	if reverse {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return rows
}

func fillN(t *testing.T, s store.Store, table store.Table, n int) {
	t.Helper()
	txn := store.NewTxn()
	for i := range n {
		txn.Put(table, []byte(keyN(i)), []byte(valueN(i)))
	}
	commit(t, s, txn)
}

// testDeleteRange: [lo, hi) bounds, a nil hi (to the end of the table), a nil
// lo (from its start), an empty range, and no effect on other tables.
func testDeleteRange(t *testing.T, h Harness) {
	s, _ := open(t, h)
	fillN(t, s, tMain, 10)
	fillN(t, s, tB, 10)

	del := func(lo, hi []byte) {
		t.Helper()
		txn := store.NewTxn()
		txn.DeleteRange(tMain, lo, hi)
		commit(t, s, txn)
	}
	del([]byte(keyN(3)), []byte(keyN(6)))
	wantTable(t, s, tMain, append(rowsN(0, 3, false), rowsN(6, 10, false)...))
	del([]byte(keyN(8)), nil)
	wantTable(t, s, tMain, append(rowsN(0, 3, false), rowsN(6, 8, false)...))
	del(nil, []byte(keyN(1)))
	wantTable(t, s, tMain, append(rowsN(1, 3, false), rowsN(6, 8, false)...))
	del([]byte(keyN(6)), []byte(keyN(6))) // empty
	wantTable(t, s, tMain, append(rowsN(1, 3, false), rowsN(6, 8, false)...))
	// Bounds between keys.
	del([]byte("k01x"), []byte("k06x"))
	wantTable(t, s, tMain, []kv{{keyN(1), valueN(1)}, {keyN(7), valueN(7)}})
	del(nil, nil)
	wantTable(t, s, tMain, nil)
	wantTable(t, s, tB, rowsN(0, 10, false))
}

// testScan: bounds, nil bounds, bounds between keys, Reverse, Limit (with and
// without Reverse and bounds), early stop, an empty table, a bad table name.
func testScan(t *testing.T, h Harness) {
	s, _ := open(t, h)
	if rows := scan(t, s, store.Range{Table: tMain}); len(rows) != 0 {
		t.Errorf("scan of an empty table returned %v", rows)
	}
	fillN(t, s, tMain, 20)
	fillN(t, s, tB, 3)
	k := func(i int) []byte { return []byte(keyN(i)) }
	cases := []struct {
		name string
		r    store.Range
		want []kv
	}{
		{"all", store.Range{}, rowsN(0, 20, false)},
		{"lo-hi", store.Range{Lo: k(5), Hi: k(10)}, rowsN(5, 10, false)},
		{"lo", store.Range{Lo: k(5)}, rowsN(5, 20, false)},
		{"hi", store.Range{Hi: k(3)}, rowsN(0, 3, false)},
		{"empty-lo", store.Range{Lo: []byte{}, Hi: k(2)}, rowsN(0, 2, false)},
		{"between-keys", store.Range{Lo: []byte("k05a"), Hi: []byte("k08a")}, rowsN(6, 9, false)},
		{"lo-equals-hi", store.Range{Lo: k(5), Hi: k(5)}, nil},
		{"past-end", store.Range{Lo: []byte("z")}, nil},
		{"reverse", store.Range{Reverse: true}, rowsN(0, 20, true)},
		{"reverse-lo-hi", store.Range{Lo: k(5), Hi: k(10), Reverse: true}, rowsN(5, 10, true)},
		{"reverse-lo", store.Range{Lo: k(17), Reverse: true}, rowsN(17, 20, true)},
		{"reverse-hi", store.Range{Hi: k(2), Reverse: true}, rowsN(0, 2, true)},
		{"limit", store.Range{Limit: 3}, rowsN(0, 3, false)},
		{"limit-larger", store.Range{Limit: 100}, rowsN(0, 20, false)},
		{"limit-lo-hi", store.Range{Lo: k(5), Hi: k(10), Limit: 2}, rowsN(5, 7, false)},
		{"reverse-limit", store.Range{Reverse: true, Limit: 3}, rowsN(17, 20, true)},
		{"reverse-limit-lo-hi", store.Range{Lo: k(5), Hi: k(10), Reverse: true, Limit: 2}, rowsN(8, 10, true)},
	}
	for _, c := range cases {
		r := c.r
		r.Table = tMain
		wantRows(t, "Scan "+c.name, scan(t, s, r), c.want)
	}

	// Early stop: fn returning false ends the scan at once.
	for _, reverse := range []bool{false, true} {
		calls := 0
		err := s.Scan(t.Context(), store.Range{Table: tMain, Reverse: reverse}, func(k, v []byte) bool {
			calls++
			return calls < 4
		})
		if err != nil {
			t.Errorf("Scan with early stop: %v", err)
		}
		if calls != 4 {
			t.Errorf("Scan (reverse=%v) called fn %d times after it returned false on the 4th, want 4", reverse, calls)
		}
	}

	if err := s.Scan(t.Context(), store.Range{Table: "Bad-Table"}, func(k, v []byte) bool { return true }); err == nil {
		t.Error("Scan with an invalid table name succeeded")
	}
}
