package controller

import (
	"context"
	"time"

	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/tables"
)

// Frontier rows of earlier layouts. A keyed computation's partitions keep
// their dedup frontiers by key range (tables.FrontierKey); after its
// partition count changed, the rows of the old ranges stay, and every job
// of the new layout reads them at its start (job/dedup.go: the earlier
// layout's frontiers). Once the new layout's own frontiers cover a row
// (tables.RedundantFrontiers), it is useless: the controller deletes it.
// A frontier only grows, so a row found redundant stays so whatever the
// jobs commit meanwhile; in the distributed mode the delete is fenced by
// the leadership like every controller write.

// frontierGCPeriod bounds how often the frontiers are looked at: a layout
// changes only while the pipeline is stopped, so the first cycle finds
// what a change left, and later looks find the rows whose new ranges
// caught up since.
const frontierGCPeriod = 30 * time.Second

// frontierGC deletes comp's redundant frontier rows; ranges is its layout.
type frontierGC struct {
	comp   string
	ranges []tables.FrontierRange
}

// decideFrontierGC adds a look at every keyed computation's frontiers to
// eff when one is due. REQUIRES: c.mu held, the layout made.
func (c *Controller) decideFrontierGC(eff *effects, now time.Time) {
	if now.Sub(c.frontierGCAt) < frontierGCPeriod {
		return
	}
	c.frontierGCAt = now
	byComp := map[string][]tables.FrontierRange{}
	for _, id := range c.order {
		p := c.partitions[id]
		if p.comp.IsSource() {
			continue
		}
		byComp[p.comp.Name] = append(byComp[p.comp.Name], tables.FrontierRange{Lo: p.spec.Lo, Hi: p.spec.Hi, ToEnd: p.spec.ToEnd})
	}
	for _, name := range c.plan.Order() {
		if rs := byComp[name]; len(rs) > 0 {
			eff.frontiers = append(eff.frontiers, frontierGC{comp: name, ranges: rs})
		}
	}
}

// collectFrontiers deletes g's redundant rows in one commit. A failure is
// only logged: the rows are looked at again later.
func (c *Controller) collectFrontiers(ctx context.Context, g frontierGC) {
	fs, err := tables.Frontiers(ctx, c.cfg.Store, g.comp)
	if err != nil {
		c.cfg.Logf("controller: frontier GC of %s: %v", g.comp, err)
		return
	}
	redundant := tables.RedundantFrontiers(fs, g.ranges)
	if len(redundant) == 0 {
		return
	}
	txn := store.NewTxn()
	for _, f := range redundant {
		txn.Delete(store.FlowState, tables.FrontierKey(g.comp, f.Stream, tables.ChannelSender(f.Sender, f.Origin), f.Range))
	}
	if err := c.cfg.Store.Commit(ctx, txn); err != nil {
		c.cfg.Logf("controller: frontier GC of %s: %v", g.comp, err)
		return
	}
	c.cfg.Logf("controller: deleted %d dedup frontier rows of %s's earlier layouts (its current partitions' own frontiers cover them)", len(redundant), g.comp)
}
