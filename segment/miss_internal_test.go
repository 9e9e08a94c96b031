package segment

import (
	"fmt"
	"testing"
	"time"
)

// TestNegCacheBound: the negative cache never holds more than maxMisses
// names, whatever the number of distinct names that miss (100,000 here,
// each added without sweeping the cache); a name answers for missTTL and
// not after.
func TestNegCacheBound(t *testing.T) {
	var c MissCache
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100_000 {
		c.Add(now, fmt.Sprintf("random-%d", i))
		if c.len() > maxMisses {
			t.Fatalf("after %d distinct misses the cache holds %d names, want at most maxMisses %d", i+1, c.len(), maxMisses)
		}
	}
	if !c.Has(now.Add(missTTL-time.Millisecond), "random-99999") {
		t.Errorf("has(the last name) just before missTTL = false, want true")
	}
	if c.Has(now.Add(missTTL), "random-99999") {
		t.Errorf("has(the last name) at missTTL = true, want false")
	}
	later := now.Add(missTTL)
	c.Add(later, "fresh")
	c.Add(later.Add(missTTL), "fresher") // the generation of 100,000's last names is dropped
	if c.len() != 2 || !c.Has(later.Add(missTTL), "fresher") {
		t.Errorf("after two more generations: %d names, has(fresher) %v; want 2 names, true", c.len(), c.Has(later.Add(missTTL), "fresher"))
	}
	c.forget(func(name string) bool { return name == "fresh" })
	if c.len() != 1 {
		t.Errorf("after forget(fresh): %d names, want 1", c.len())
	}
}
