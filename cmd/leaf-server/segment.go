package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// startSegment starts segment mode on st exactly as run serves it: the demo
// tag (cfg.DemoTag), the high-water marks in cfg.DataDir, the generator, and
// the fields of deps that the handler serves segment mode from. The caller
// calls stop and then closes the returned generator after the server has
// stopped; tests call startSegment so that they wire what run wires. When
// start is not nil (st is not open: the database did not answer at start,
// openSegmentStore) it is retried in the background (retryStart), which
// stop ends, and the demo tag, the engine log and a tag refresh wait until
// it succeeds. deps.Store is st too: the routes bound their calls by
// deps.WaitTimeout (api), the generator's loads by their own timeout.
func startSegment(ctx context.Context, cfg Config, st store.Store, start startFunc, log *slog.Logger, deps *api.Deps) (gen *segment.Generator, stop func(), err error) {
	if cfg.DemoTag && start == nil {
		if err := seedDemo(ctx, st, log); err != nil {
			return nil, nil, err
		}
	}
	loads := api.NewLoadMetrics() // counts and times every load for /metrics
	// Restore safety: per-tag high-water marks survive restarts in the data
	// dir, in an append-only log; the JSON file of older versions is imported.
	marks := segment.NewLogMarks(filepath.Join(cfg.DataDir, "segment-marks.log"),
		filepath.Join(cfg.DataDir, "segment-marks.json"), log)
	marks.CompactBytes = cfg.MarksCompactBytes
	scfg := segment.Config{
		WaitTimeout:     cfg.WaitTimeout,
		RefreshInterval: cfg.RefreshInterval,
		Marks:           marks,
		Logger:          log,
		OnLoad:          loads.Observe,
	}
	if cfg.ReturnTail {
		scfg.Tails = st // give tails back at SIGTERM, take in others' (issue 22)
	}
	gen, err = segment.New(ctx, st, scfg)
	if err != nil {
		return nil, nil, fmt.Errorf("start segment mode: %w", err)
	}
	deps.Segment, deps.Store, deps.LoadMetrics = gen, st, loads
	// Date-grouped tags (issue 14): declarations in leaf_group, the latest
	// period issued per tag in the data dir.
	groups, err := group.New(ctx, gen, st, group.Config{
		PeriodsPath: filepath.Join(cfg.DataDir, "group-periods.json"),
		Clock:       testClock(segment.SystemClock{}), // offset from a file in leaftest builds only
		Logger:      log,
	})
	if err != nil {
		_ = gen.Close() // always nil; the start error is the one to report
		return nil, nil, fmt.Errorf("start grouped tags: %w", err)
	}
	deps.Groups = groups
	stop = func() {}
	if start != nil {
		stop = retryStart(start, cfg, log, func(ctx context.Context) {
			// What a start with the database up does, now that it answers.
			if cfg.DemoTag {
				if err := seedDemo(ctx, st, log); err != nil {
					log.Warn("demo tag not inserted", "err", err)
				}
			}
			logEngine(ctx, st, log)
			if err := gen.Refresh(ctx); err != nil {
				log.Warn("segment: tag list not read after the database came up; the refresh loop retries", "err", err)
			}
		})
	}
	log.Info("segment mode on", "store", dsn.Redact(cfg.DSN()), "high_water_marks", marks.Path())
	return gen, stop, nil
}

// demoTag is Leaf's sample row, inserted into an empty leaf_alloc so that the
// first curl of a new user works.
var demoTag = store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000, Description: "Test leaf Segment Mode Get Id"}

// seedDemo inserts Leaf's sample row when leaf_alloc is empty.
func seedDemo(ctx context.Context, st store.Store, log *slog.Logger) error {
	tags, err := st.Tags(ctx)
	if err != nil {
		return fmt.Errorf("list tags: %w", err)
	}
	if len(tags) > 0 {
		return nil
	}
	err = st.Create(ctx, demoTag)
	if err != nil && !errors.Is(err, store.ErrTagExists) {
		return fmt.Errorf("insert demo tag: %w", err)
	}
	log.Info("leaf_alloc was empty: inserted the demo tag", "biz_tag", demoTag.BizTag, "step", demoTag.Step)
	return nil
}

// closeGroups stops the grouped tags' loop (nil: none started).
func closeGroups(g *group.Groups) error {
	if g == nil {
		return nil
	}
	return g.Close()
}

// returnTails stops segment issuing for good and gives the unused tails back
// (--return-tail; issue 22 item 2): the grouped tags' loop is closed, the
// loads in flight are waited for (they become next segments instead of
// being cancelled after a commit), the generator is closed, so that no
// request is served after a tail is computed (the HTTP server has drained
// already), then segment.Generator.ReturnTails runs; all within
// --shutdown-timeout. A failure is logged: the tail is then
// skipped, as without tail return.
func returnTails(cfg Config, gen *segment.Generator, groups *group.Groups, log *slog.Logger) {
	if !cfg.ReturnTail {
		return
	}
	_ = closeGroups(groups)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := gen.WaitLoads(ctx); err != nil {
		log.Warn("segment: a segment load was still in flight at the stop", "err", err)
	}
	_ = gen.Close() // always nil
	st, err := gen.ReturnTails(ctx, tailPause(log))
	if err != nil {
		log.Warn("segment: not every unused tail was given back; those IDs are skipped", "err", err)
	}
	log.Info("segment: unused tails given back", "tags", st.Tags, "ids", st.IDs, "kept", st.Missed)
}
