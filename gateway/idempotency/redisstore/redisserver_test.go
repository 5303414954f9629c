package redisstore

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// privateRedis is a redis-server of the test's own, on a free port, that
// the test may kill and restart.
type privateRedis struct {
	port  int
	addr  string
	extra []string // more redis-server arguments
	cmd   *exec.Cmd
}

// startRedis starts a private redis-server, skipping the test if there is
// none on PATH; it is killed when the test ends.
func startRedis(t *testing.T, extra ...string) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not on PATH")
	}
	port := freePort(t)
	s := &privateRedis{port: port, addr: "127.0.0.1:" + strconv.Itoa(port), extra: extra}
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *privateRedis) start(t *testing.T) {
	t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no"}, s.extra...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	probe := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer probe.Close()
	deadline := time.Now().Add(10 * time.Second)
	for probe.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", s.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *privateRedis) stop(t *testing.T) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Errorf("kill redis-server: %v", err)
	}
	_ = s.cmd.Wait() // killed: the exit status is an error by design
	s.cmd = nil
}
