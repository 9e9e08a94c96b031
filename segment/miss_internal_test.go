package segment

import (
	"fmt"
	"testing"
	"time"
)

// TestNegCacheBound: the negative cache never holds more than maxMisses
// names, whatever the number of distinct names that miss; an entry
// answers for missTTL, and once entries expire a new name sweeps them.
func TestNegCacheBound(t *testing.T) {
	c := negCache{}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 * maxMisses {
		c.add(now, fmt.Sprintf("random-%d", i))
	}
	if len(c) != maxMisses {
		t.Fatalf("len after %d distinct misses = %d, want maxMisses %d", 3*maxMisses, len(c), maxMisses)
	}
	if !c.has(now.Add(missTTL-time.Millisecond), "random-0") {
		t.Errorf("has(random-0) just before missTTL = false, want true")
	}
	if c.has(now, fmt.Sprintf("random-%d", maxMisses)) {
		t.Errorf("has(a name that found the cache full) = true, want false")
	}
	later := now.Add(missTTL)
	c.add(later, "fresh")
	if len(c) != 1 || !c.has(later, "fresh") {
		t.Fatalf("after the entries expired: len %d, has(fresh) %v, want 1, true", len(c), c.has(later, "fresh"))
	}
	if c.has(later.Add(missTTL), "fresh") || len(c) != 0 {
		t.Errorf("has(fresh) after missTTL = true or entry kept (len %d), want false and dropped", len(c))
	}
}
