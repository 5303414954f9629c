// Package redistest runs real redis-server processes for tests: the shared
// server of the machine (127.0.0.1:6379) when it answers, and private
// servers on free loopback ports that a test may kill and restart.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
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

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited (and been waited for)
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
	s, err := Launch(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

// Restart starts the server again (after Kill) on the same port and dir.
// It returns once the server answers on its port, or fails when the
// process exits first (its port was taken) or a server of another process
// answers there.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir}, s.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // killed: the exit status is an error by design
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	probe := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pid, err := serverPID(probe)
		switch {
		case err == nil && pid == cmd.Process.Pid:
			return nil
		case err == nil:
			_ = cmd.Process.Kill()
			<-exited
			s.cmd = nil
			return &startError{addr: s.Addr, taken: true}
		}
		select {
		case <-exited:
			s.cmd = nil
			return &startError{addr: s.Addr, taken: true}
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return &startError{addr: s.Addr}
		}
	}
}

// serverPID is the process id of the redis-server probe reaches, once it
// answers PING (not while it still loads its data).
func serverPID(probe *redis.Client) (int, error) {
	ctx := context.Background()
	if err := probe.Ping(ctx).Err(); err != nil {
		return 0, err
	}
	info, err := probe.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redistest: INFO server has no process_id")
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// startError is a redis-server that did not start; taken: because its
// port was taken between FreePort and its bind (by another process on a
// busy machine), so a new port may do.
type startError struct {
	addr  string
	taken bool
}

func (e *startError) Error() string {
	if e.taken {
		return "redistest: redis-server could not listen on " + e.addr + ": the port is taken"
	}
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
