package testconn

import (
	"context"

	"github.com/weir-stream/weir/internal/countoracle"
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
	countoracle.Sort(res)
	return res, nil
}

// ExactlyOnce checks the exactly-once oracle of the keyed counter
// (countoracle.Violations): for every key with want[k] inputs, the
// committed counts (sorted, as CountsOf returns them) are exactly 1..n,
// once each. It returns a description of every violation, sorted.
func ExactlyOnce(got map[string][]int64, want map[string]int) []string {
	return countoracle.Violations(got, want)
}
