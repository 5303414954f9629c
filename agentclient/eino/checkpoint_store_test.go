package eino_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/agentclient/eino"
)

func newFileStore(t *testing.T, dir string) *eino.FileCheckPointStore {
	t.Helper()
	store, err := eino.NewFileCheckPointStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func mustGet(t *testing.T, store *eino.FileCheckPointStore, id string) []byte {
	t.Helper()
	data, ok, err := store.Get(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Get(%q) = %q, %v, %v; want a checkpoint", id, data, ok, err)
	}
	return data
}

func TestFileCheckPointStoreReadsBackWhatItWrote(t *testing.T) {
	ctx := context.Background()
	store := newFileStore(t, t.TempDir())
	if data, ok, err := store.Get(ctx, "thread-1"); ok || err != nil || data != nil {
		t.Fatalf("Get of an id never written = %q, %v, %v; want nothing, no error", data, ok, err)
	}
	for _, version := range []string{"first", "second", "third"} {
		if err := store.Set(ctx, "thread-1", []byte(version)); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustGet(t, store, "thread-1"); string(got) != "third" {
		t.Errorf("Get(thread-1) = %q, want the newest version", got)
	}
	if got := mustGet(t, store, "thread-1@1"); string(got) != "first" {
		t.Errorf("Get(thread-1@1) = %q, want version 1", got)
	}
	if data, ok, err := store.Get(ctx, "thread-1@4"); ok || err != nil {
		t.Errorf("Get of a version never written = %q, %v, %v; want nothing", data, ok, err)
	}
	if versions, err := store.Versions("thread-1"); err != nil || !slices.Equal(versions, []int{1, 2, 3}) {
		t.Errorf("Versions = %v, %v; want [1 2 3]", versions, err)
	}
	// Another id is another history.
	if err := store.Set(ctx, "thread-2", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, store, "thread-1"); string(got) != "third" {
		t.Errorf("Get(thread-1) after a write of thread-2 = %q", got)
	}
	// A finished run's checkpoints are deleted; the other run's stay.
	for range 2 {
		if err := store.Delete("thread-1"); err != nil {
			t.Fatal(err)
		}
	}
	if data, ok, err := store.Get(ctx, "thread-1"); ok || err != nil {
		t.Errorf("Get after Delete = %q, %v, %v; want nothing", data, ok, err)
	}
	if got := mustGet(t, store, "thread-2"); string(got) != "other" {
		t.Errorf("Get(thread-2) after deleting thread-1 = %q", got)
	}
}

func TestFileCheckPointStoreOutlivesItsWriter(t *testing.T) {
	// A new store on the same directory, as a new process opens it, reads
	// what the old one wrote, byte for byte, and goes on numbering after it.
	dir := t.TempDir()
	checkpoint := bytes.Repeat([]byte{0, 1, 2, 0xff}, 4096)
	if err := newFileStore(t, dir).Set(context.Background(), "run", checkpoint); err != nil {
		t.Fatal(err)
	}
	reopened := newFileStore(t, dir)
	if got := mustGet(t, reopened, "run"); !bytes.Equal(got, checkpoint) {
		t.Fatalf("a new store read %d bytes, want the %d written", len(got), len(checkpoint))
	}
	if err := reopened.Set(context.Background(), "run", []byte("next")); err != nil {
		t.Fatal(err)
	}
	if versions, err := reopened.Versions("run"); err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Errorf("Versions after a write by the new store = %v, %v; want [1 2]", versions, err)
	}
}

func TestFileCheckPointStoreIgnoresAWriteCutShort(t *testing.T) {
	// A process killed during Set leaves at most a temporary file: the
	// checkpoint read is the last whole version, and the next Set works.
	dir := t.TempDir()
	store := newFileStore(t, dir)
	if err := store.Set(context.Background(), "run", []byte("whole")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("checkpoint directory holds %v (%v), want one directory", entries, err)
	}
	runDir := filepath.Join(dir, entries[0].Name())
	if err := os.WriteFile(filepath.Join(runDir, "tmp-123456"), []byte("half of a checkp"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, store, "run"); string(got) != "whole" {
		t.Errorf("Get = %q, want the last whole version", got)
	}
	if err := store.Set(context.Background(), "run", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, store, "run@2"); string(got) != "after" {
		t.Errorf("Get(run@2) = %q, want the write after the cut one", got)
	}
	names, err := os.ReadDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if e.Name() != "1" && e.Name() != "2" && e.Name() != "tmp-123456" {
			t.Errorf("Set left %s behind", e.Name())
		}
	}
}

func TestFileCheckPointStoreKeepsIDsInsideItsDirectory(t *testing.T) {
	parent := t.TempDir()
	store := newFileStore(t, filepath.Join(parent, "checkpoints"))
	ctx := context.Background()
	for _, id := range []string{"../escaped", "a/b", `a\b`, "user:42 thread"} {
		if err := store.Set(ctx, id, []byte(id)); err != nil {
			t.Fatalf("Set(%q): %v", id, err)
		}
		if got := mustGet(t, store, id); string(got) != id {
			t.Errorf("Get(%q) = %q", id, got)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("the store wrote outside its directory: %v", entries)
	}
	for _, id := range []string{"", ".", ".."} {
		if err := store.Set(ctx, id, []byte("x")); err == nil {
			t.Errorf("Set(%q) succeeded, want an error", id)
		}
	}
}

func TestFileCheckPointStoreConcurrentSetsKeepEveryVersion(t *testing.T) {
	store := newFileStore(t, t.TempDir())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := store.Set(context.Background(), "run", fmt.Appendf(nil, "writer %d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if versions, err := store.Versions("run"); err != nil || !slices.Equal(versions, []int{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("Versions after 8 concurrent writes = %v, %v", versions, err)
	}
}
