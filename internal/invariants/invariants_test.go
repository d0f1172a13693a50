package invariants

import "testing"

func TestCheckPanicsOnlyWhenEnabled(t *testing.T) {
	defer func() {
		r := recover()
		if Enabled && r == nil {
			t.Fatal("Check(false) did not panic with invariants enabled")
		}
		if !Enabled && r != nil {
			t.Fatalf("Check(false) panicked with invariants disabled: %v", r)
		}
	}()
	Check(true, "never")
	Check(false, "expected failure %d", 1)
}
