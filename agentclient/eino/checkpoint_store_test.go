package eino_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// fileCheckPointStore is an Eino compose.CheckPointStore on files, so a
// checkpoint outlives the process that wrote it. Every Set keeps a new
// version (<dir>/<id>/<n>); Get(id) returns the newest, Get("id@n") version
// n, which is how a test forks a run from an earlier checkpoint (time
// travel).
type fileCheckPointStore struct{ dir string }

func (s fileCheckPointStore) Get(_ context.Context, checkPointID string) ([]byte, bool, error) {
	id, version, pinned := strings.Cut(checkPointID, "@")
	if !pinned {
		versions, err := s.versions(id)
		if err != nil || len(versions) == 0 {
			return nil, false, err
		}
		version = strconv.Itoa(versions[len(versions)-1])
	}
	data, err := os.ReadFile(filepath.Join(s.dir, id, version))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read checkpoint %s: %w", checkPointID, err)
	}
	return data, true, nil
}

func (s fileCheckPointStore) Set(_ context.Context, checkPointID string, checkPoint []byte) error {
	versions, err := s.versions(checkPointID)
	if err != nil {
		return err
	}
	next := 1
	if len(versions) > 0 {
		next = versions[len(versions)-1] + 1
	}
	dir := filepath.Join(s.dir, checkPointID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	// Written whole, synced, then renamed: a kill -9 leaves the previous
	// version or this one, never half of one.
	tmp, err := os.CreateTemp(dir, "tmp-")
	if err != nil {
		return fmt.Errorf("checkpoint file: %w", err)
	}
	if _, err := tmp.Write(checkPoint); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close checkpoint: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, strconv.Itoa(next)))
}

// versions lists the stored versions of id, oldest first.
func (s fileCheckPointStore) versions(id string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", id, err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
