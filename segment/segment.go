// Package segment hands out IDs from database-reserved segments, as Leaf's
// SegmentIDGenImpl does.
//
// Per biz_tag a SegmentBuffer holds two segments, current and next. IDs come
// from the current one by a single atomic add. Once more than 10% of it is
// used a background load reserves the next segment [max_id-step, max_id) in
// one transaction. When current runs dry the buffer switches to next; a
// caller that finds no next waits for the load in flight, bounded by a timeout.
package segment

// (contract stub: implementation in progress)
