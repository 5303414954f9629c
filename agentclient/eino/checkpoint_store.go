package eino

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cloudwego/eino/compose"
)

var _ compose.CheckPointStore = (*FileCheckPointStore)(nil)

// FileCheckPointStore is an Eino checkpoint store (compose.CheckPointStore,
// for compose.WithCheckPointStore) on files, so a checkpoint outlives the
// process that wrote it: a run killed between two checkpoints resumes from
// the last one in a new process.
//
// Every Set keeps a new version (<dir>/<id>/<n>, n = 1, 2, …); Get(id)
// returns the newest and Get(id + "@" + n) version n, which is how an
// application forks a run from an earlier checkpoint (read "thread@1",
// write another id with compose.WithWriteToCheckPointID). Versions lists
// them. Nothing is deleted but by Delete: call it for a finished run when
// nothing will fork from it any more.
//
// A version is written whole to a temporary file, synced, and renamed into
// place, so a process killed during Set leaves the previous version or the
// new one, never part of one. One process writes a checkpoint id at a time
// (Eino's runs of one thread are sequential); within a process, Set is
// safe for concurrent use.
type FileCheckPointStore struct {
	dir string
	mu  sync.Mutex // serialises Set, which picks the next version number
}

// NewFileCheckPointStore returns a store keeping its checkpoints under dir,
// which it creates if need be.
func NewFileCheckPointStore(dir string) (*FileCheckPointStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("toolgateway eino: checkpoint directory: %w", err)
	}
	return &FileCheckPointStore{dir: dir}, nil
}

// Get implements compose.CheckPointStore: the newest version of
// checkPointID, or the version n that "id@n" names; false when there is
// none.
func (s *FileCheckPointStore) Get(_ context.Context, checkPointID string) ([]byte, bool, error) {
	id, version, pinned := cutVersion(checkPointID)
	dir, err := s.idDir(id)
	if err != nil {
		return nil, false, err
	}
	if !pinned {
		versions, err := s.Versions(id)
		if err != nil || len(versions) == 0 {
			return nil, false, err
		}
		version = versions[len(versions)-1]
	}
	data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(version)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("toolgateway eino: read checkpoint %s: %w", checkPointID, err)
	}
	return data, true, nil
}

// Set implements compose.CheckPointStore: it stores checkPoint as the next
// version of checkPointID.
func (s *FileCheckPointStore) Set(_ context.Context, checkPointID string, checkPoint []byte) error {
	dir, err := s.idDir(checkPointID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	versions, err := s.Versions(checkPointID)
	if err != nil {
		return err
	}
	next := 1
	if len(versions) > 0 {
		next = versions[len(versions)-1] + 1
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("toolgateway eino: checkpoint directory of %s: %w", checkPointID, err)
	}
	if err := writeFileAtomically(dir, strconv.Itoa(next), checkPoint); err != nil {
		return fmt.Errorf("toolgateway eino: checkpoint %s: %w", checkPointID, err)
	}
	return nil
}

// Versions lists the stored versions of the checkpoint id, oldest first.
func (s *FileCheckPointStore) Versions(id string) ([]int, error) {
	dir, err := s.idDir(id)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("toolgateway eino: list checkpoints of %s: %w", id, err)
	}
	var out []int
	for _, e := range entries {
		// Temporary files of a write that was cut short are not versions.
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Delete removes every version of the checkpoint id; an id with none is
// not an error.
func (s *FileCheckPointStore) Delete(id string) error {
	dir, err := s.idDir(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("toolgateway eino: delete checkpoints of %s: %w", id, err)
	}
	return nil
}

// idDir is the directory of the checkpoint id: one path element, whatever
// the id holds (a "/" or ".." in a thread id must not reach outside dir).
func (s *FileCheckPointStore) idDir(id string) (string, error) {
	name := url.QueryEscape(id)
	if id == "" || name == "." || name == ".." {
		return "", fmt.Errorf("toolgateway eino: checkpoint id %q cannot name a directory", id)
	}
	return filepath.Join(s.dir, name), nil
}

// cutVersion splits "id@n" (n a positive number) into id and n; any other
// id is not pinned to a version.
func cutVersion(checkPointID string) (id string, version int, pinned bool) {
	at := strings.LastIndexByte(checkPointID, '@')
	if at < 0 {
		return checkPointID, 0, false
	}
	n, err := strconv.Atoi(checkPointID[at+1:])
	if err != nil || n <= 0 {
		return checkPointID, 0, false
	}
	return checkPointID[:at], n, true
}

// writeFileAtomically writes data to dir/name through a synced temporary
// file renamed into place, then syncs dir so the rename itself is durable.
func writeFileAtomically(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "tmp-")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}
