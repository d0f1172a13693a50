package store

// Require returns a copy of t whose commit also requires lease id to be
// active (t is unchanged; zero is ignored). A controller fences its own
// writes by its leadership lease this way (package cluster): once a
// standby took over, none of them can land.
func (t *Txn) Require(id LeaseID) *Txn {
	c := t.Clone()
	if id != 0 {
		c.prerequisites = append(c.prerequisites, id)
	}
	return c
}
