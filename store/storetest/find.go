package storetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
)

// testFind checks FindTags and FindGroups: only names with a row come
// back, across more names than one statement asks for, names compared
// case-sensitively; and Now reads a clock near this host's (the databases
// of the suite run here).
func testFind(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, tag := range []string{"find-a", "find-b"} {
		create(t, s, store.Row{BizTag: tag, Step: 10})
	}
	create(t, s, store.Row{BizTag: "find-c", Step: 10, Ordered: true})
	if err := s.CreateGroup(ctx, store.Group{BizTag: "find-g", Grp: "day", TimeZone: "UTC", Format: "{yyyyMMdd}{seq:4}", Step: 10}); err != nil {
		t.Fatalf("CreateGroup = %v", err)
	}
	// 2.2 chunks of names, the real ones at the start, across a chunk
	// boundary and at the end.
	var names []string
	for i := range 2*store.FindChunk + 100 {
		names = append(names, fmt.Sprintf("find-missing-%d", i))
	}
	names[0], names[store.FindChunk], names[len(names)-1] = "find-a", "find-c", "find-g"
	names = append(names, "FIND-B", "find-b")

	// The ordered flag comes from leaf_ordered in the same statement.
	got, err := s.FindTags(ctx, names)
	if want := map[string]bool{"find-a": false, "find-b": false, "find-c": true}; err != nil || !maps.Equal(got, want) {
		t.Fatalf("FindTags(%d names) = %v, %v, want %v", len(names), got, err, want)
	}
	if got, err := s.FindTags(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("FindTags(nil) = %v, %v, want none", got, err)
	}
	groups, err := s.FindGroups(ctx, names)
	if err != nil || len(groups) != 1 || groups[0].BizTag != "find-g" || groups[0].Format != "{yyyyMMdd}{seq:4}" {
		t.Fatalf("FindGroups(%d names) = %+v, %v, want the declaration of find-g", len(names), groups, err)
	}
	if got, err := s.FindGroups(ctx, []string{"find-a", "FIND-G"}); err != nil || len(got) != 0 {
		t.Fatalf("FindGroups(find-a, FIND-G) = %+v, %v, want none", got, err)
	}
	before := time.Now()
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatalf("Now() = %v", err)
	}
	if d := now.Sub(before); d < -time.Minute || d > time.Minute || now.Location() != time.UTC {
		t.Fatalf("Now() = %v, host clock %v: want UTC within a minute of the host", now, before)
	}
}
