package main

import (
	"context"
	"time"

	"github.com/leaf-go/leaf/store"
)

// FindTags implements [store.Store] once the database has opened.
func (l *lazyStore) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	st, err := l.store()
	if err != nil {
		return nil, err
	}
	return st.FindTags(ctx, tags)
}

// FindGroups implements [store.GroupStore] once the database has opened.
func (l *lazyStore) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	gs, err := l.groupStore()
	if err != nil {
		return nil, err
	}
	return gs.FindGroups(ctx, tags)
}

// Now implements [store.GroupStore] once the database has opened.
func (l *lazyStore) Now(ctx context.Context) (time.Time, error) {
	gs, err := l.groupStore()
	if err != nil {
		return time.Time{}, err
	}
	return gs.Now(ctx)
}

// FindTags implements [store.Store] within the bound.
func (b boundStore) FindTags(ctx context.Context, tags []string) (map[string]bool, error) {
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return b.Store.FindTags(ctx, tags)
}

// FindGroups implements [store.GroupStore] within the bound.
func (b boundStore) FindGroups(ctx context.Context, tags []string) ([]store.Group, error) {
	gs, err := b.groupStore()
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.FindGroups(ctx, tags)
}

// Now implements [store.GroupStore] within the bound.
func (b boundStore) Now(ctx context.Context) (time.Time, error) {
	gs, err := b.groupStore()
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := b.ctx(ctx)
	defer cancel()
	return gs.Now(ctx)
}
