// Package redistest runs real redis-server processes for tests: the shared
// server of the machine (127.0.0.1:6379) when it answers, and private
// servers on free loopback ports that a test may kill and restart.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SharedAddr is the Redis this machine kind runs before tests start.
const SharedAddr = "127.0.0.1:6379"

var (
	sharedOnce sync.Once
	sharedUp   bool
)

// Addr returns the address of a Redis for tests that do not kill it: the
// shared one when it answers, else a private server started for the test.
// Tests must isolate themselves with a key prefix (Prefix) and never flush.
func Addr(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() {
		c := redis.NewClient(&redis.Options{Addr: SharedAddr, MaxRetries: -1, DialTimeout: time.Second})
		defer c.Close()
		sharedUp = c.Ping(context.Background()).Err() == nil
	})
	if sharedUp {
		return SharedAddr
	}
	return Start(t).Addr
}

// Prefix returns a key prefix no other test uses.
func Prefix(name string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return name + ":" + hex.EncodeToString(b) + ":"
}

// CleanPrefix deletes every key under prefix (SCAN + DEL, never FLUSH).
func CleanPrefix(ctx context.Context, c redis.UniversalClient, prefix string) {
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

// Server is a private redis-server process.
type Server struct {
	Addr string
	Port int
	Dir  string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Option adds redis-server arguments.
type Option func(*Server)

// WithAOF turns on the append-only file with fsync on every write, so a
// restart keeps every acknowledged write.
func WithAOF() Option {
	return func(s *Server) { s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always") }
}

// WithArgs passes extra redis-server arguments.
func WithArgs(args ...string) Option {
	return func(s *Server) { s.args = append(s.args, args...) }
}

// Start starts a private redis-server on a free port, in a temporary
// directory, killed when the test ends. The test is skipped only when
// redis-server is not installed.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	port := FreePort(t)
	s := &Server{Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: t.TempDir(),
		args: []string{"--save", "", "--appendonly", "no"}}
	for _, o := range opts {
		o(s)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

// Restart starts the server again (after Kill) on the same port and dir.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir}, s.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	probe := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for probe.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			return &startError{addr: s.Addr}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait() // killed: the exit status is an error by design
	s.cmd = nil
}

type startError struct{ addr string }

func (e *startError) Error() string {
	return "redistest: redis-server on " + e.addr + " did not answer"
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
