// Package lease is the policy every coordinated worker-ID source shares (sqllease's row,
// etcdworker's key, the ZooKeeper session, a Kubernetes Lease), so that each source keeps only
// its coordinator's calls. It is modelled on etcd's concurrency.Session, which Mutex and
// Election share: the session holds the lease, renews it in the background and says when it is
// gone; the source says how to renew.
//
// The rules (issue 20 item 1), the same for every source:
//
//  1. Expiry = the local instant read just before the last confirmed renewal was sent + TTL.
//     The coordinator computes its own end later (when the request arrives), so the local end
//     comes first while the clocks' rates differ by less than Margin/TTL; a slow answer
//     shortens the local lease and never lengthens it.
//  2. Stop issuing at expiry − Margin, on three clocks: the Clock's readings (Go's monotonic
//     clock with the system clock: immune to wall steps, blind to suspend), the wall clock and
//     the boot clock (both count suspended time; the boot clock is never stepped). Whichever
//     ends first ends the lease ([Deadline]).
//  3. A lost lease is final for that claim: after [ErrLeaseLost] nothing renews it again; the
//     process claims anew (leaf-server's supervisor does, without a restart).
//  4. A claim that finds no history (no previous holder record, no time high-water mark: the
//     coordinator's data was lost or deleted) waits out the longest time a previous holder
//     could still be issuing, TTL + Margin from the claim, before it serves
//     ([Config].NoHistory): that holder renewed last before its record vanished, so it stops
//     on its own clock by then, or notices the loss at its next renewal.
//
// How a source uses it:
//
//	sent := lease.Read(clock)            // 1. claim: read the clocks before the request is sent
//	... claim at the coordinator ...     //    granted: the TTL it granted; found: any history?
//	s, err := lease.Start(lease.Config{Policy: p, Clock: clock, Renew: src.renew,
//		NoHistory: !found}, sent, granted) // 2. renew loop: s calls src.renew every Policy.Renew
//	// 3. serve: the source's Expiry and Ready are s.Expiry() and s.Ready() (Expired and a
//	//    reason while a claim without history is held back, or renewals have lapsed)
//	// 4. lost: src.renew returns an error wrapping ErrLeaseLost when the coordinator says the
//	//    claim is gone (or the source calls s.Lose): s.Lost() is closed, Expiry is Expired for
//	//    good; the owner (leaf-server's supervisor) claims again through step 1
//	s.Stop()                             // 5. release at the coordinator unless s.Err() != nil
package lease
