package main

import (
	"context"
	"errors"

	"github.com/leaf-go/leaf/store"
)

// The wrappers of dbstore.go hide the optional interfaces of the store they wrap; these
// methods pass them on, so that /metrics keeps leaf_store_retries_total (api reads RetryCounts
// from Deps.Store) and grouped tags work on a database that came up after the start.

// retryCounts returns st's RetryCounts (the postgres and mysql stores), or nil when st has
// none (sqlite).
func retryCounts(st store.Store) map[string]uint64 {
	if rc, ok := st.(interface{ RetryCounts() map[string]uint64 }); ok {
		return rc.RetryCounts()
	}
	return nil
}

// RetryCounts passes on the wrapped store's retry counts by cause (nil when it keeps none).
func (b boundStore) RetryCounts() map[string]uint64 { return retryCounts(b.Store) }

// RetryCounts passes on the open store's retry counts; nil before it opened.
func (l *lazyStore) RetryCounts() map[string]uint64 {
	st := l.st.Load()
	if st == nil {
		return nil
	}
	return retryCounts(*st)
}

var errNoGroupStore = errors.New("this store keeps no leaf_group table")

// groupStore returns the open store as a store.GroupStore (every SQL store is one).
func (l *lazyStore) groupStore() (store.GroupStore, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	gs, ok := st.(store.GroupStore)
	if !ok {
		return nil, errNoGroupStore
	}
	return gs, nil
}

// Groups implements [store.GroupStore] once the database has opened.
func (l *lazyStore) Groups(ctx context.Context) ([]store.Group, error) {
	gs, err := l.groupStore()
	if err != nil {
		return nil, err
	}
	return gs.Groups(ctx)
}

// CreateGroup implements [store.GroupStore] once the database has opened.
func (l *lazyStore) CreateGroup(ctx context.Context, g store.Group) error {
	gs, err := l.groupStore()
	if err != nil {
		return err
	}
	return gs.CreateGroup(ctx, g)
}

// UpdateGroup implements [store.GroupStore] once the database has opened.
func (l *lazyStore) UpdateGroup(ctx context.Context, g store.Group) error {
	gs, err := l.groupStore()
	if err != nil {
		return err
	}
	return gs.UpdateGroup(ctx, g)
}

// RaisePrunedBefore implements [store.GroupStore] once the database has opened.
func (l *lazyStore) RaisePrunedBefore(ctx context.Context, tag, key string) (string, error) {
	gs, err := l.groupStore()
	if err != nil {
		return "", err
	}
	return gs.RaisePrunedBefore(ctx, tag, key)
}

// DeleteGroup implements [store.GroupStore] once the database has opened.
func (l *lazyStore) DeleteGroup(ctx context.Context, tag string) error {
	gs, err := l.groupStore()
	if err != nil {
		return err
	}
	return gs.DeleteGroup(ctx, tag)
}

var _ store.GroupStore = (*lazyStore)(nil)

// groupStore returns the wrapped store as a store.GroupStore (every SQL store and the
// lazyStore are one).
func (b boundStore) groupStore() (store.GroupStore, error) {
	gs, ok := b.Store.(store.GroupStore)
	if !ok {
		return nil, errNoGroupStore
	}
	return gs, nil
}

// Groups implements [store.GroupStore] within the bound. The admin API's refusal of names
// that collide with a grouped tag's period rows reads it through Deps.Store: without these
// methods that refusal found no GroupStore and let them through.
func (b boundStore) Groups(ctx context.Context) ([]store.Group, error) {
	gs, err := b.groupStore()
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.Groups(ctx)
}

// CreateGroup implements [store.GroupStore] within the bound.
func (b boundStore) CreateGroup(ctx context.Context, g store.Group) error {
	gs, err := b.groupStore()
	if err != nil {
		return err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.CreateGroup(ctx, g)
}

// UpdateGroup implements [store.GroupStore] within the bound.
func (b boundStore) UpdateGroup(ctx context.Context, g store.Group) error {
	gs, err := b.groupStore()
	if err != nil {
		return err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.UpdateGroup(ctx, g)
}

// RaisePrunedBefore implements [store.GroupStore] within the bound.
func (b boundStore) RaisePrunedBefore(ctx context.Context, tag, key string) (string, error) {
	gs, err := b.groupStore()
	if err != nil {
		return "", err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.RaisePrunedBefore(ctx, tag, key)
}

// DeleteGroup implements [store.GroupStore] within the bound.
func (b boundStore) DeleteGroup(ctx context.Context, tag string) error {
	gs, err := b.groupStore()
	if err != nil {
		return err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.DeleteGroup(ctx, tag)
}

var _ store.GroupStore = boundStore{}
