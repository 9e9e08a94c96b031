package segment

// HighWater returns the high-water mark of tag: the highest max_id this
// generator accepted for it or read from the table, and with [Config.Marks]
// also those of earlier runs on the same data directory; 0 when it has none.
// The mark outlives the tag's buffer: a tag deleted and not yet created again
// keeps it. IDs below the mark may have been handed out, so a row of tag with
// max_id below it would repeat them (the admin API refuses to create or fence
// a tag there, issue 16 item 8). Safe for concurrent use.
func (g *Generator) HighWater(tag string) int64 {
	g.marksMu.Lock()
	defer g.marksMu.Unlock()
	return g.highs[tag]
}
