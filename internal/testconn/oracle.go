package testconn

import (
	"context"
	"fmt"
	"sort"

	"github.com/weir-stream/weir/store"
)

// CountsOf returns, per key, the counts the collecting sink sinkID
// committed ({"key", "count"} rows, the keyed counter's outputs), sorted.
func CountsOf(ctx context.Context, st store.Store, sinkID string) (map[string][]int64, error) {
	rows, err := ReadCollected(ctx, st, sinkID)
	if err != nil {
		return nil, err
	}
	res := map[string][]int64{}
	for _, r := range rows {
		k, _ := r.Row["key"].(string)
		c, _ := r.Row["count"].(int64)
		res[k] = append(res[k], c)
	}
	for k := range res {
		sort.Slice(res[k], func(i, j int) bool { return res[k][i] < res[k][j] })
	}
	return res, nil
}

// ExactlyOnce checks the exactly-once oracle of the keyed counter: for
// every key with want[k] inputs, the committed counts are exactly 1..n,
// once each. It returns a description of every violation, sorted.
func ExactlyOnce(got map[string][]int64, want map[string]int) []string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var bad []string
	for k := range keys {
		n, c := want[k], got[k]
		ok := len(c) == n
		for i := 0; ok && i < n; i++ {
			ok = c[i] == int64(i+1)
		}
		if !ok {
			bad = append(bad, fmt.Sprintf("key %s: want counts 1..%d, got %v", k, n, summarize(c)))
		}
	}
	sort.Strings(bad)
	return bad
}

func summarize(c []int64) string {
	if len(c) <= 12 {
		return fmt.Sprint(c)
	}
	return fmt.Sprintf("%v … %v (%d values)", c[:6], c[len(c)-6:], len(c))
}
